//! Strategic merge patch for the common cases: JSON merge patch semantics,
//! except that the well-known lists (see [`super::schema`]) merge by their
//! patch merge key or as sets, and the `$patch`, `$deleteFromPrimitiveList`,
//! `$retainKeys` and `$setElementOrder` directives are understood.
//! It never records field ownership and never validates the patched
//! object against its kind (callers do both afterwards).

use serde_json::{Map, Value};

use super::error::{PatchError, Result};
use super::kind::{ObjectKind, PatchStrategy};
use super::schema::patch_strategy;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `target`, using the merge keys of
/// `kind`.
///
/// Maps merge recursively and `null` deletes a key; lists with a merge key
/// merge item by item (`{"name": "x", "$patch": "delete"}` removes an
/// item); `metadata.finalizers` and other primitive merge lists union and
/// honour `$deleteFromPrimitiveList/<field>`; `$patch: replace` replaces a
/// map or list, `$patch: delete` removes a map; `$retainKeys` clears keys
/// not listed; `$setElementOrder` is accepted and ignored. Lists not in the
/// table are replaced. Custom resources get only the metadata merge keys
/// (the real server rejects strategic merge patch for them; the caller
/// decides whether to).
///
/// # Errors
///
/// [`PatchError::InvalidPatch`] when the patch is not an object or a merged
/// list holds non-objects, [`PatchError::MissingMergeKey`] when a list item
/// lacks its merge key, [`PatchError::InvalidDirective`] for an unknown
/// `$patch` value or a malformed directive.
pub fn strategic_merge_patch(target: &Value, patch: &Value, kind: &ObjectKind) -> Result<Value> {
    if !patch.is_object() {
        return Err(PatchError::InvalidPatch(
            "a strategic merge patch must be a JSON object".into(),
        ));
    }
    let mut path = Vec::new();
    Ok(merge_value(Some(target), patch, kind, &mut path)?.unwrap_or(Value::Object(Map::new())))
}

fn dotted(path: &[String]) -> String {
    path.join(".")
}

/// Merges `patch` into `target`; `None` means the value is deleted.
fn merge_value(
    target: Option<&Value>,
    patch: &Value,
    kind: &ObjectKind,
    path: &mut Vec<String>,
) -> Result<Option<Value>> {
    match patch {
        Value::Object(p) => merge_map(target.and_then(Value::as_object), p, kind, path),
        _ => Ok(Some(patch.clone())),
    }
}

fn merge_map(
    target: Option<&Map<String, Value>>,
    patch: &Map<String, Value>,
    kind: &ObjectKind,
    path: &mut Vec<String>,
) -> Result<Option<Value>> {
    let mut out = target.cloned().unwrap_or_default();
    match patch.get(PATCH) {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "delete" => return Ok(None),
        Some(Value::String(d)) if d == "replace" => out = Map::new(),
        Some(other) => {
            return Err(PatchError::InvalidDirective {
                field: dotted(path),
                reason: format!("unknown $patch value {other}"),
            })
        }
    }
    let mut retain: Option<Vec<String>> = None;
    for (key, value) in patch {
        if key == PATCH || key.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if key == RETAIN_KEYS {
            let Value::Array(keys) = value else {
                return Err(PatchError::InvalidDirective {
                    field: dotted(path),
                    reason: "$retainKeys must be a list of field names".into(),
                });
            };
            retain = Some(
                keys.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            );
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(doomed) = value else {
                return Err(PatchError::InvalidDirective {
                    field: dotted(path),
                    reason: format!("{key} must be a list"),
                });
            };
            if let Some(Value::Array(items)) = out.get_mut(field) {
                items.retain(|item| !doomed.contains(item));
            }
            continue;
        }
        path.push(key.clone());
        let merged = if value.is_null() {
            None
        } else if let Value::Array(items) = value {
            merge_list(out.get(key), items, kind, path)?
        } else {
            merge_value(out.get(key), value, kind, path)?
        };
        path.pop();
        match merged {
            Some(v) => {
                out.insert(key.clone(), v);
            }
            None => {
                out.remove(key);
            }
        }
    }
    if let Some(keep) = retain {
        out.retain(|k, _| keep.iter().any(|r| r == k));
    }
    Ok(Some(Value::Object(out)))
}

fn merge_list(
    target: Option<&Value>,
    patch: &[Value],
    kind: &ObjectKind,
    path: &mut Vec<String>,
) -> Result<Option<Value>> {
    let field_path: Vec<&str> = path.iter().map(String::as_str).collect();
    let strategy = patch_strategy(kind, &field_path);
    let live: Vec<Value> = match target {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    // `{"$patch": "replace"}` as a list item replaces the list with the
    // other items.
    let replace = patch.iter().any(|item| {
        item.as_object().is_some_and(|m| {
            m.len() == 1 && m.get(PATCH).and_then(Value::as_str) == Some("replace")
        })
    });
    let patch_items: Vec<&Value> = patch
        .iter()
        .filter(|item| {
            !item.as_object().is_some_and(|m| {
                m.len() == 1 && m.get(PATCH).and_then(Value::as_str) == Some("replace")
            })
        })
        .collect();
    match strategy {
        PatchStrategy::Replace => {
            let mut out = Vec::with_capacity(patch_items.len());
            for item in patch_items {
                if let Some(v) = merge_value(None, item, kind, path)? {
                    out.push(v);
                }
            }
            Ok(Some(Value::Array(out)))
        }
        PatchStrategy::MergePrimitives => {
            let mut out = if replace { Vec::new() } else { live };
            for item in patch_items {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(Some(Value::Array(out)))
        }
        PatchStrategy::MergeByKey(key) => {
            let mut out = if replace { Vec::new() } else { live };
            for item in patch_items {
                let Some(obj) = item.as_object() else {
                    return Err(PatchError::InvalidPatch(format!(
                        "{}: list items must be objects with merge key {key:?}, got {item}",
                        dotted(path)
                    )));
                };
                let Some(id) = obj.get(key) else {
                    return Err(PatchError::MissingMergeKey {
                        field: dotted(path),
                        key: key.to_owned(),
                        item: item.to_string(),
                    });
                };
                let pos = out
                    .iter()
                    .position(|existing| existing.get(key) == Some(id));
                let merged = merge_map(pos.and_then(|i| out[i].as_object()), obj, kind, path)?;
                match (pos, merged) {
                    (Some(i), Some(v)) => out[i] = v,
                    (Some(i), None) => {
                        out.remove(i);
                    }
                    (None, Some(v)) => out.push(v),
                    (None, None) => {}
                }
            }
            Ok(Some(Value::Array(out)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> ObjectKind {
        ObjectKind::new("", "v1", "Pod")
    }

    fn smp(target: Value, patch: Value) -> Value {
        strategic_merge_patch(&target, &patch, &pod()).expect("patch applies")
    }

    #[test]
    fn strategic_merges_containers_by_name_and_keeps_others() {
        let live = json!({"spec":{"containers":[
            {"name":"app","image":"app:1","env":[{"name":"A","value":"1"}]},
            {"name":"sidecar","image":"side:1"}]}});
        let got = smp(
            live,
            json!({"spec":{"containers":[{"name":"app","image":"app:2","env":[{"name":"B","value":"2"}]},{"name":"new","image":"n:1"}]}}),
        );
        assert_eq!(
            got,
            json!({"spec":{"containers":[
                {"name":"app","image":"app:2","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},
                {"name":"sidecar","image":"side:1"},
                {"name":"new","image":"n:1"}]}})
        );
    }

    #[test]
    fn strategic_merge_keys_table() {
        let cases = [
            (
                json!({"spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"name":"http"}]}]}}),
                json!({"spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"name":"web"},{"containerPort":443}]}]}}),
                json!({"spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"name":"web"},{"containerPort":443}]}]}}),
            ),
            (
                json!({"spec":{"containers":[{"name":"a","volumeMounts":[{"mountPath":"/x","name":"v"}]}]}}),
                json!({"spec":{"containers":[{"name":"a","volumeMounts":[{"mountPath":"/y","name":"w"}]}]}}),
                json!({"spec":{"containers":[{"name":"a","volumeMounts":[{"mountPath":"/x","name":"v"},{"mountPath":"/y","name":"w"}]}]}}),
            ),
            (
                json!({"spec":{"volumes":[{"name":"v","emptyDir":{}}],"imagePullSecrets":[{"name":"s"}]}}),
                json!({"spec":{"volumes":[{"name":"w","emptyDir":{}}],"imagePullSecrets":[{"name":"t"}]}}),
                json!({"spec":{"volumes":[{"name":"v","emptyDir":{}},{"name":"w","emptyDir":{}}],"imagePullSecrets":[{"name":"s"},{"name":"t"}]}}),
            ),
            (
                json!({"spec":{"tolerations":[{"key":"a"}]}}),
                json!({"spec":{"tolerations":[{"key":"b"}]}}),
                json!({"spec":{"tolerations":[{"key":"b"}]}}),
            ),
            (
                json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"}]}}),
                json!({"metadata":{"ownerReferences":[{"uid":"2","name":"b"}]}}),
                json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"},{"uid":"2","name":"b"}]}}),
            ),
            (
                json!({"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"Scheduled","status":"True"}]}}),
                json!({"status":{"conditions":[{"type":"Ready","status":"True"}]}}),
                json!({"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Scheduled","status":"True"}]}}),
            ),
            (
                json!({"spec":{"unknownList":[1,2]}}),
                json!({"spec":{"unknownList":[3]}}),
                json!({"spec":{"unknownList":[3]}}),
            ),
        ];
        for (live, patch, want) in cases {
            assert_eq!(smp(live, patch.clone()), want, "patch {patch}");
        }
    }

    #[test]
    fn strategic_finalizers_merge_as_set_and_delete_from_primitive_list() {
        let live = json!({"metadata":{"finalizers":["a","b"]}});
        assert_eq!(
            smp(live.clone(), json!({"metadata":{"finalizers":["b","c"]}})),
            json!({"metadata":{"finalizers":["a","b","c"]}})
        );
        assert_eq!(
            smp(
                live,
                json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}})
            ),
            json!({"metadata":{"finalizers":["b"]}})
        );
    }

    #[test]
    fn strategic_null_deletes_keys_in_labels_and_annotations() {
        let live = json!({"metadata":{"labels":{"a":"1","b":"2"},"annotations":{"x":"y"}}});
        assert_eq!(
            smp(
                live,
                json!({"metadata":{"labels":{"a":null,"c":"3"},"annotations":null}})
            ),
            json!({"metadata":{"labels":{"b":"2","c":"3"}}})
        );
    }

    #[test]
    fn strategic_patch_delete_directive_removes_list_item_and_map() {
        let live = json!({"spec":{"containers":[{"name":"a"},{"name":"b"}],"securityContext":{"runAsUser":1}}});
        assert_eq!(
            smp(
                live,
                json!({"spec":{"containers":[{"name":"a","$patch":"delete"}],"securityContext":{"$patch":"delete"}}})
            ),
            json!({"spec":{"containers":[{"name":"b"}]}})
        );
    }

    #[test]
    fn strategic_patch_replace_directive_replaces_map_and_list() {
        let live = json!({"spec":{"containers":[{"name":"a"},{"name":"b"}],"nodeSelector":{"x":"1","y":"2"}}});
        assert_eq!(
            smp(
                live,
                json!({"spec":{"containers":[{"name":"c"},{"$patch":"replace"}],"nodeSelector":{"$patch":"replace","z":"3"}}})
            ),
            json!({"spec":{"containers":[{"name":"c"}],"nodeSelector":{"z":"3"}}})
        );
    }

    #[test]
    fn strategic_retain_keys_clears_unlisted_fields_and_set_element_order_is_ignored() {
        let live =
            json!({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}});
        let deploy = ObjectKind::new("apps", "v1", "Deployment");
        let got = strategic_merge_patch(
            &live,
            &json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null},"$setElementOrder/x":[]}}),
            &deploy,
        );
        assert_eq!(got, Ok(json!({"spec":{"strategy":{"type":"Recreate"}}})));
    }

    #[test]
    fn strategic_rejects_missing_merge_key_and_bad_directives() {
        let live = json!({"spec":{"containers":[{"name":"a"}]}});
        let err = strategic_merge_patch(
            &live,
            &json!({"spec":{"containers":[{"image":"x"}]}}),
            &pod(),
        )
        .expect_err("missing key");
        assert!(err.to_string().contains("merge key: name"), "{err}");
        assert!(err.to_string().contains("spec.containers"), "{err}");
        assert!(strategic_merge_patch(&live, &json!({"spec":{"$patch":"frob"}}), &pod()).is_err());
        assert!(strategic_merge_patch(&live, &json!([1]), &pod()).is_err());
    }

    #[test]
    fn strategic_new_subtree_drops_nulls_and_directives() {
        let got = smp(
            json!({}),
            json!({"spec":{"containers":[{"name":"a","env":[{"name":"X","$patch":"delete"}],"args":null}]}}),
        );
        assert_eq!(got, json!({"spec":{"containers":[{"name":"a","env":[]}]}}));
    }
}
