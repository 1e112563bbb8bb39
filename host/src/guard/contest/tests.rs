//! Write-war rules, judged on made-up timelines (no cluster).

use super::*;
use crate::guest::Gvk;
use serde_json::json;

/// Our field manager.
pub(super) const OURS: &str = "wasmctrl/g";

/// The output the rules judge.
pub(super) fn target() -> ObjectKey {
    ObjectKey {
        gvk: Gvk::from_api_version("v1", "ConfigMap"),
        namespace: Some("ops".into()),
        name: "summary".into(),
    }
}

/// The object `u1` at `rv`, as `manager` left it after taking our field
/// `data.k` (the server records that it owns it now).
fn live(rv: &str, manager: &str) -> Json {
    json!({"metadata": {"uid": "u1", "resourceVersion": rv, "managedFields": [
        {"manager": OURS, "operation": "Apply", "time": "2026-12-01T00:00:00Z",
         "fieldsV1": {"f:data": {"f:other": {}}}},
        {"manager": manager, "operation": "Apply", "time": "2026-12-01T00:00:05Z",
         "fieldsV1": {"f:data": {"f:k": {}}}},
    ]}, "data": {"k": manager}})
}

/// `live`, with uid `uid`: another object of the same name.
fn live_as(uid: &str, rv: &str, manager: &str) -> Json {
    let mut l = live(rv, manager);
    l["metadata"]["uid"] = json!(uid);
    l
}

/// Our apply of `data.k = ours` to the object `u1`, answered at `rv`.
fn apply_ours(c: &Contests, rv: &str) {
    c.sets(&target(), false, &json!({"data": {"k": "ours"}}));
    c.wrote(&target(), Some("u1"), Some(rv), Instant::now());
}

fn config() -> ContestConfig {
    ContestConfig {
        flips: 3,
        window: Duration::from_secs(60),
        backoff: Duration::from_secs(30),
        max_backoff: Duration::from_secs(100),
        // The tests' clocks run ahead of `wrote`'s: every take-back
        // here reacts (see the drift test for a real one).
        react: Duration::from_secs(3600),
    }
}

#[test]
fn a_new_desired_value_over_our_own_write_is_not_a_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    assert_eq!(
        c.retaken(&target(), &live("1", "x"), OURS, false, now),
        None
    );
    c.wrote(&target(), None, Some("5"), Instant::now());
    assert_eq!(
        c.retaken(&target(), &live("5", "x"), OURS, false, now),
        None
    );
}

#[test]
fn three_take_backs_in_the_window_declare_a_war_naming_the_manager() {
    let c = Contests::new(config());
    let t0 = Instant::now();
    let mut verdicts = Vec::new();
    for i in 0..3u64 {
        apply_ours(&c, &format!("{}", 2 * i));
        let now = t0 + Duration::from_secs(10 * i);
        verdicts.push(c.retaken(
            &target(),
            &live(&format!("{}", 2 * i + 1), "rival"),
            OURS,
            false,
            now,
        ));
    }
    assert_eq!(verdicts[0], Some((Verdict::Contested, "rival".into())));
    assert_eq!(verdicts[1], Some((Verdict::Contested, "rival".into())));
    assert_eq!(
        verdicts[2],
        Some((
            Verdict::War {
                backoff: Duration::from_secs(30),
                flips: 3
            },
            "rival".into()
        ))
    );
    let now = t0 + Duration::from_secs(25);
    let (left, who) = c.held_back(&target(), now).expect("held back");
    assert_eq!((left, who.as_str()), (Duration::from_secs(25), "rival"));
    assert_eq!(c.held_back(&target(), now + Duration::from_secs(26)), None);
}

#[test]
fn take_backs_spread_beyond_the_window_never_make_a_war() {
    let c = Contests::new(config());
    let t0 = Instant::now();
    for i in 0..10u64 {
        apply_ours(&c, &format!("{}", 2 * i));
        let now = t0 + Duration::from_secs(31 * i);
        let v = c.retaken(
            &target(),
            &live(&format!("{}", 2 * i + 1), "hand"),
            OURS,
            false,
            now,
        );
        assert_eq!(v.map(|v| v.0), Some(Verdict::Contested), "take-back {i}");
    }
}

#[test]
fn take_backs_by_different_parties_never_add_up_to_a_war() {
    // A war is us against one other party. Two edits by a person and a
    // deletion (which names no manager), or single take-backs by three
    // managers, are each their own contest.
    let c = Contests::new(config());
    let now = Instant::now();
    let mut rv = 0u64;
    let mut edit = |c: &Contests, manager: &str| {
        rv += 2;
        apply_ours(c, &rv.to_string());
        c.retaken(
            &target(),
            &live(&(rv + 1).to_string(), manager),
            OURS,
            false,
            now,
        )
        .map(|v| v.0)
    };
    for manager in ["kubectl-edit", "kubectl-edit", "a", "b", "c"] {
        assert_eq!(edit(&c, manager), Some(Verdict::Contested), "{manager}");
    }
    // The object deleted at once after our write: the deletion's own first
    // take-back, however many edits came before.
    c.wrote(&target(), Some("u1"), Some("99"), now);
    c.vanished(&target(), Some("u1"), None, now);
    assert_eq!(
        c.removed(&target(), None, now),
        Some((Verdict::Contested, DELETER.to_string()))
    );
    assert_eq!(c.held_back(&target(), now), None);
}

#[test]
fn a_war_resumed_after_the_hold_back_doubles_it_up_to_the_cap() {
    let c = Contests::new(config());
    let mut now = Instant::now();
    let mut rv = 0u64;
    let mut take_back = |c: &Contests, now: Instant| {
        rv += 2;
        apply_ours(c, &rv.to_string());
        c.retaken(
            &target(),
            &live(&(rv + 1).to_string(), "rival"),
            OURS,
            false,
            now,
        )
        .map(|v| v.0)
    };
    for _ in 0..2 {
        take_back(&c, now);
    }
    let mut backoffs = Vec::new();
    for _ in 0..4 {
        match take_back(&c, now) {
            Some(Verdict::War { backoff, .. }) => {
                backoffs.push(backoff.as_secs());
                // The host forces once more right after the hold-back.
                now += backoff + Duration::from_secs(1);
            }
            other => panic!("expected a war, got {other:?}"),
        }
    }
    assert_eq!(backoffs, vec![30, 60, 100, 100]);
}

#[test]
fn a_change_of_fields_we_did_not_set_is_not_a_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    c.sets(
        &target(),
        true,
        &json!({"status": {"observedGeneration": 1}}),
    );
    c.wrote(&target(), Some("u1"), Some("4"), Instant::now());
    // Someone edited the spec: our status is as we set it.
    let mut l = live("5", "kubectl-patch");
    l["spec"] = json!({"message": "new"});
    l["status"] = json!({"observedGeneration": 1, "other": "x"});
    assert_eq!(c.retaken(&target(), &l, OURS, true, now), None);
    // Our status field changed (the server records who owns it now): a
    // take-back.
    l["status"]["observedGeneration"] = json!(0);
    l["metadata"]["managedFields"][1]["fieldsV1"] =
        json!({"f:status": {"f:observedGeneration": {}}});
    assert!(c.retaken(&target(), &l, OURS, true, now).is_some());
}

#[test]
fn a_slow_edit_of_our_fields_is_drift_repaired_and_never_a_war() {
    let c = Contests::new(ContestConfig {
        react: Duration::from_millis(1),
        ..config()
    });
    for i in 0..5u64 {
        c.sets(&target(), false, &json!({"data": {"k": "ours"}}));
        c.wrote(
            &target(),
            Some("u1"),
            Some(&format!("{}", 2 * i)),
            Instant::now(),
        );
        std::thread::sleep(Duration::from_millis(5));
        let mut l = live(&format!("{}", 2 * i + 1), "kubectl-edit");
        l["data"] = json!({"k": "hand"});
        let v = c.retaken(&target(), &l, OURS, false, Instant::now());
        assert_eq!(v, Some((Verdict::Drift, "kubectl-edit".into())), "edit {i}");
    }
    assert_eq!(c.held_back(&target(), Instant::now()), None);
}

#[test]
fn one_foreign_version_is_counted_once() {
    let c = Contests::new(config());
    let now = Instant::now();
    apply_ours(&c, "4");
    assert!(c
        .retaken(&target(), &live("5", "x"), OURS, false, now)
        .is_some());
    assert_eq!(
        c.retaken(&target(), &live("5", "x"), OURS, false, now),
        None
    );
}

#[test]
fn the_other_manager_is_the_latest_writer_that_is_not_us() {
    let l = json!({"metadata": {"managedFields": [
        {"manager": "old", "operation": "Update", "time": "2026-12-01T00:00:01Z"},
        {"manager": OURS, "operation": "Apply", "time": "2026-12-01T00:00:09Z"},
        {"manager": "kubectl", "operation": "Update", "time": "2026-12-01T00:00:05Z"},
        {"manager": "rival", "operation": "Apply", "time": "2026-12-01T00:00:05Z"},
    ]}});
    assert_eq!(other_manager(&l, OURS, None), "rival");
    assert_eq!(other_manager(&json!({}), OURS, None), "unknown");
    assert_eq!(
        other_manager(&json!({"metadata": {"managedFields": "junk"}}), OURS, None),
        "unknown"
    );
}

#[test]
fn the_other_manager_is_the_one_that_owns_our_fields_not_a_later_bystander() {
    // A JSON patch of our field (kubectl patch --type json: manager
    // kubectl-patch, operation Update), then someone labelling the
    // object.
    let l = json!({"metadata": {"creationTimestamp": "2026-12-01T00:00:00Z", "managedFields": [
        {"manager": OURS, "operation": "Apply", "time": "2026-12-01T00:00:01Z",
         "fieldsV1": {"f:data": {"f:other": {}}}},
        {"manager": "kubectl-patch", "operation": "Update", "time": "2026-12-01T00:00:05Z",
         "fieldsV1": {"f:data": {"f:owner": {}}}},
        {"manager": "kubectl-label", "operation": "Update", "time": "2026-12-01T00:00:09Z",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}},
    ]}});
    let set = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "summary"}, "data": {"owner": "guest"}});
    assert_eq!(other_manager(&l, OURS, Some(&set)), "kubectl-patch");
    // Status writes look at the status part only.
    let status = json!({"status": {"phase": "Seen"}});
    let mut l = l;
    l["metadata"]["managedFields"][2]["fieldsV1"] = json!({"f:status": {"f:phase": {}}});
    assert_eq!(other_manager(&l, OURS, Some(&status)), "kubectl-label");
}

#[test]
fn entries_from_before_the_object_was_created_name_nobody() {
    // A new object that reused the name, created from a copy of the
    // old one's body: its managedFields came along.
    let l = json!({"metadata": {"creationTimestamp": "2026-12-01T00:10:00Z", "managedFields": [
        {"manager": "rival", "operation": "Apply", "time": "2026-12-01T00:09:00Z",
         "fieldsV1": {"f:data": {"f:owner": {}}}},
        {"manager": "creator", "operation": "Update", "time": "2026-12-01T00:10:00Z",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}},
    ]}});
    let set = json!({"data": {"owner": "guest"}});
    assert_eq!(other_manager(&l, OURS, Some(&set)), "creator");
    assert_eq!(other_manager(&l, OURS, None), "creator");
}

#[test]
fn re_creations_soon_after_our_deletes_declare_a_war_naming_the_creator() {
    let c = Contests::new(config());
    let now = Instant::now();
    let mut verdicts = Vec::new();
    for i in 0..3u64 {
        let (ours, theirs) = (format!("u{i}"), format!("u{}", i + 1));
        c.deleted(&target(), Some(&ours), Some(&(2 * i).to_string()), now);
        c.vanished(&target(), Some(&ours), None, now);
        let l = live_as(&theirs, &(2 * i + 1).to_string(), "recreator");
        verdicts.push(c.recreated(&target(), &l, OURS, now).map(|v| v.0));
        // Counted once per deletion of ours.
        assert_eq!(c.recreated(&target(), &l, OURS, now), None);
    }
    assert_eq!(
        verdicts[..2],
        [Some(Verdict::Contested), Some(Verdict::Contested)]
    );
    assert_eq!(
        verdicts[2],
        Some(Verdict::War {
            backoff: Duration::from_secs(30),
            flips: 3
        })
    );
    let (_, who) = c.held_back(&target(), now).expect("held back");
    assert_eq!(who, "recreator");
}

#[test]
fn an_object_we_never_deleted_existing_is_no_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    assert_eq!(c.recreated(&target(), &live("1", "x"), OURS, now), None);
    c.wrote(&target(), None, Some("1"), Instant::now());
    assert_eq!(c.recreated(&target(), &live("2", "x"), OURS, now), None);
}

#[test]
fn a_slow_re_creation_is_drift_and_never_a_war() {
    let c = Contests::new(ContestConfig {
        react: Duration::from_millis(1),
        ..config()
    });
    for i in 0..5u64 {
        let (ours, theirs) = (format!("u{i}"), format!("u{}", i + 1));
        c.deleted(
            &target(),
            Some(&ours),
            Some(&(2 * i).to_string()),
            Instant::now(),
        );
        std::thread::sleep(Duration::from_millis(5));
        let v = c.recreated(
            &target(),
            &live_as(&theirs, &(2 * i + 1).to_string(), "hand"),
            OURS,
            Instant::now(),
        );
        assert_eq!(v, Some((Verdict::Drift, "hand".into())), "re-creation {i}");
    }
    assert_eq!(c.held_back(&target(), Instant::now()), None);
}

#[test]
fn deletions_soon_after_our_writes_declare_a_war_naming_the_deletion() {
    let c = Contests::new(config());
    let now = Instant::now();
    let mut verdicts = Vec::new();
    for i in 0..3u64 {
        // We create it; someone deletes it at once.
        let uid = format!("u{i}");
        c.wrote(&target(), Some(&uid), Some(&i.to_string()), now);
        c.vanished(&target(), Some(&uid), None, now);
        verdicts.push(c.removed(&target(), None, now));
        // Counted once per deletion.
        assert_eq!(c.removed(&target(), None, now), None);
    }
    assert_eq!(
        verdicts[..2],
        [
            Some((Verdict::Contested, DELETER.to_string())),
            Some((Verdict::Contested, DELETER.to_string()))
        ]
    );
    assert_eq!(
        verdicts[2],
        Some((
            Verdict::War {
                backoff: Duration::from_secs(30),
                flips: 3
            },
            DELETER.to_string()
        ))
    );
    let (_, who) = c.held_back(&target(), now).expect("held back");
    assert_eq!(who, DELETER);
}

#[test]
fn a_child_collected_with_its_owner_and_created_for_a_new_owner_is_no_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    for i in 0..5u64 {
        // Owner incarnation `i` gets its child; the owner is deleted at
        // once and the garbage collector takes the child with it.
        let uid = format!("u{i}");
        c.wrote(&target(), Some(&uid), Some(&i.to_string()), now);
        let old = format!("owner-{i}");
        c.vanished(&target(), Some(&uid), Some(&old), now);
        let new = format!("owner-{}", i + 1);
        assert_eq!(c.removed(&target(), Some(&new), now), None, "owner {i}");
    }
    assert_eq!(c.held_back(&target(), now), None);
    // The same owner's child deleted at once is a take-back as before.
    c.wrote(&target(), Some("u9"), Some("9"), now);
    c.vanished(&target(), Some("u9"), Some("owner-5"), now);
    assert_eq!(
        c.removed(&target(), Some("owner-5"), now),
        Some((Verdict::Contested, DELETER.to_string()))
    );
}

#[test]
fn take_backs_of_an_earlier_owners_child_do_not_count_for_a_new_owners() {
    let c = Contests::new(config());
    let now = Instant::now();
    // A person deletes owner A's child twice, each time at once: two
    // take-backs, one short of a war.
    for i in 0..2u64 {
        let uid = format!("a{i}");
        c.wrote(&target(), Some(&uid), Some(&i.to_string()), now);
        c.vanished(&target(), Some(&uid), Some("owner-a"), now);
        assert_eq!(
            c.removed(&target(), Some("owner-a"), now),
            Some((Verdict::Contested, DELETER.to_string()))
        );
    }
    // Owner A goes, with its child (late: no take-back).
    c.wrote(&target(), Some("a2"), Some("2"), now);
    let later = now + Duration::from_secs(10);
    c.vanished(&target(), Some("a2"), Some("owner-a"), later);
    // Owner B of the same name gets its child; deleted at once, once: its
    // first take-back, not a third.
    assert_eq!(c.removed(&target(), Some("owner-b"), later), None);
    c.wrote(&target(), Some("b0"), Some("3"), later);
    c.vanished(&target(), Some("b0"), Some("owner-b"), later);
    assert_eq!(
        c.removed(&target(), Some("owner-b"), later),
        Some((Verdict::Contested, DELETER.to_string()))
    );
    assert_eq!(c.held_back(&target(), later), None);
}

#[test]
fn a_slow_deletion_of_our_output_is_drift_and_never_counted() {
    let c = Contests::new(ContestConfig {
        react: Duration::from_millis(1),
        ..config()
    });
    for i in 0..5u64 {
        let uid = format!("u{i}");
        c.wrote(&target(), Some(&uid), Some(&i.to_string()), Instant::now());
        std::thread::sleep(Duration::from_millis(5));
        c.vanished(&target(), Some(&uid), None, Instant::now());
        assert_eq!(
            c.removed(&target(), None, Instant::now()),
            None,
            "deletion {i}"
        );
    }
    assert_eq!(c.held_back(&target(), Instant::now()), None);
    assert!(lock(&c.objects).is_empty(), "nothing kept for drift");
}

#[test]
fn our_own_delete_or_an_object_we_never_wrote_is_no_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    c.vanished(&target(), Some("u1"), None, now);
    assert_eq!(c.removed(&target(), None, now), None);
    c.wrote(&target(), Some("u1"), Some("1"), now);
    c.deleted(&target(), Some("u1"), Some("1"), now);
    c.vanished(&target(), Some("u1"), None, now);
    assert_eq!(c.removed(&target(), None, now), None);
}

#[test]
fn a_deleted_output_is_forgotten_unless_its_contest_matters() {
    let c = Contests::new(config());
    let now = Instant::now();
    apply_ours(&c, "1");
    // Deleted long after our write (drift).
    c.vanished(&target(), Some("u1"), None, now + Duration::from_secs(7200));
    assert!(lock(&c.objects).is_empty(), "nothing on record: forgotten");
    // Deleted by us: its re-creation would be a take-back.
    c.deleted(&target(), Some("u1"), Some("1"), now);
    c.vanished(&target(), Some("u1"), None, now);
    assert!(lock(&c.objects).contains_key(&target()));
    // In a war: the hold-back survives a delete.
    for i in 1..4u64 {
        apply_ours(&c, &format!("{}", 2 * i));
        c.retaken(
            &target(),
            &live(&format!("{}", 2 * i + 1), "rival"),
            OURS,
            false,
            now,
        );
    }
    c.vanished(&target(), Some("u1"), None, now);
    assert!(c.held_back(&target(), now).is_some());
}

#[test]
fn only_our_own_last_apply_of_the_same_body_is_unchanged() {
    let c = Contests::new(config());
    let t = target();
    let body = json!({"data": {"k": "ours"}});
    assert!(!c.unchanged(&t, false, "5", &body), "never written");
    c.sets(&t, false, &body);
    assert!(
        !c.unchanged(&t, false, "5", &body),
        "sent, not yet returned"
    );
    c.wrote(&t, None, Some("5"), Instant::now());
    c.applied(&t, false, "5");
    assert!(c.unchanged(&t, false, "5", &body));
    assert!(
        !c.unchanged(&t, false, "6", &body),
        "someone wrote after us"
    );
    assert!(!c.unchanged(&t, true, "5", &body), "the other part");
    assert!(
        !c.unchanged(&t, false, "5", &json!({"data": {"k": "new"}})),
        "a new body"
    );
    // A later apply that failed: its body was never stored.
    let failed = json!({"data": {"k": "failed"}});
    c.sets(&t, false, &failed);
    assert!(!c.unchanged(&t, false, "5", &failed));
    assert!(!c.unchanged(&t, false, "5", &body));
    // Any other write of ours (a merge patch, a finalizer) moves the version.
    c.sets(&t, false, &body);
    c.wrote(&t, None, Some("7"), Instant::now());
    c.applied(&t, false, "7");
    c.wrote(&t, None, Some("8"), Instant::now());
    assert!(!c.unchanged(&t, false, "8", &body));
    c.deleted(&t, None, None, Instant::now());
    assert!(!c.unchanged(&t, false, "7", &body));
}

fn numbered(i: usize) -> ObjectKey {
    ObjectKey {
        name: format!("child-{i}"),
        ..target()
    }
}

/// A controller whose primaries come and go deletes their children: the
/// record of each deletion matters for a window (someone re-creating the
/// object soon is a take-back), then goes, while the records of objects
/// that exist stay.
#[test]
fn records_of_deleted_objects_go_once_their_window_has_passed() {
    let c = Contests::new(config());
    c.sets(&target(), false, &json!({"data": {"a": "1"}}));
    c.wrote(&target(), None, Some("7"), Instant::now());
    c.applied(&target(), false, "7");
    for i in 0..SWEEP_EVERY {
        c.deleted(&numbered(i), None, None, Instant::now());
    }
    assert_eq!(
        c.len(),
        SWEEP_EVERY + 1,
        "a sweep within the window keeps every recent deletion"
    );
    let later = Instant::now() + config().window * 2;
    for i in 0..SWEEP_EVERY {
        c.vanished(&numbered(SWEEP_EVERY + i), None, None, later);
    }
    assert_eq!(
        c.len(),
        1,
        "past the window only the record of the object that exists stays"
    );
    assert!(
        c.unchanged(&target(), false, "7", &json!({"data": {"a": "1"}})),
        "and it still tells our own last apply"
    );
}

/// The flapping label: ~2 ms after our delete a second reconcile
/// still finds the object we deleted in the cache. It is no re-creation
/// and nothing to delete again; only another uid, newer than our delete,
/// written by another manager, is.
#[test]
fn the_object_we_deleted_still_in_the_cache_is_no_re_creation() {
    let c = Contests::new(config());
    let now = Instant::now();
    apply_ours(&c, "4");
    c.deleted(&target(), Some("u1"), Some("5"), now);
    let stale = live("4", OURS);
    assert!(c.ours_deleted(&target(), Some("u1")));
    assert_eq!(c.recreated(&target(), &stale, OURS, now), None);
    // An older object of that name, delivered late: no re-creation either.
    assert_eq!(
        c.recreated(&target(), &live_as("u0", "3", "x"), OURS, now),
        None
    );
    // Re-created by ourselves (another process with our manager): none.
    let mut ours = live_as("u2", "6", "x");
    ours["metadata"]["managedFields"] = json!([{"manager": OURS, "operation": "Apply"}]);
    assert_eq!(c.recreated(&target(), &ours, OURS, now), None);
    assert_eq!(
        c.recreated(&target(), &live_as("u2", "6", "creator"), OURS, now),
        Some((Verdict::Contested, "creator".into()))
    );
}

#[test]
fn a_cache_older_than_our_writes_answer_is_no_take_back() {
    let c = Contests::new(config());
    let now = Instant::now();
    apply_ours(&c, "7");
    // The rival's version our forced apply overwrote, still in the cache.
    assert_eq!(
        c.retaken(&target(), &live("6", "rival"), OURS, false, now),
        None
    );
    // A newer version that only we own: nobody took anything back.
    assert_eq!(
        c.retaken(&target(), &live("8", OURS), OURS, false, now),
        None
    );
    // A resourceVersion that is not an integer is no fact of order.
    assert_eq!(
        c.retaken(&target(), &live("x9", "rival"), OURS, false, now),
        None
    );
    assert_eq!(
        c.retaken(&target(), &live("9", "rival"), OURS, false, now),
        Some((Verdict::Contested, "rival".into()))
    );
}

#[test]
fn our_own_deletes_echo_and_an_older_objects_deletion_are_no_removal() {
    let c = Contests::new(config());
    let now = Instant::now();
    // Our delete's echo arrives before its answer.
    apply_ours(&c, "4");
    c.vanished(&target(), Some("u1"), None, now);
    c.deleted(&target(), Some("u1"), Some("4"), now);
    assert_eq!(c.removed(&target(), None, now), None);
    // We create `u2`; a late copy of `u1`'s deletion arrives.
    c.wrote(&target(), Some("u2"), Some("6"), now);
    c.vanished(&target(), Some("u1"), None, now);
    assert_eq!(c.removed(&target(), None, now), None);
    // `u2` deleted by someone else: one take-back, however often its
    // deletion is delivered.
    c.vanished(&target(), Some("u2"), None, now);
    c.vanished(&target(), Some("u2"), None, now);
    assert_eq!(
        c.removed(&target(), None, now),
        Some((Verdict::Contested, DELETER.into()))
    );
    c.vanished(&target(), Some("u2"), None, now);
    assert_eq!(c.removed(&target(), None, now), None);
}
