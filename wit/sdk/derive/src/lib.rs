//! `#[derive(View)]`: a struct whose fields name their projection paths
//! once (`#[field("spec.message")]`, `#[conditions("status.conditions")]`,
//! `#[pod_resources("nvidia.com/gpu")]`) becomes a `wasmctrl_guest_sdk::View`
//! with a companion `<Name>Fields` of resolved handles. This crate only
//! checks the struct's shape and generates code naming the SDK's paths;
//! how each Rust type reads from a snapshot is the SDK's `FieldValue`, so a
//! field type it does not support fails to compile there, naming the type.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::{parse_macro_input, Data, DeriveInput, Fields, GenericParam, Ident, LitStr};

/// Derives `wasmctrl_guest_sdk::View` for a struct with named fields, each
/// marked with one of:
///
/// - `#[field("path")]`: one projected path, read as the field's type
///   (`Option<&str>`, `Option<String>`, `Option<i64>`, `Option<bool>`,
///   `Option<f64>`, `Vec<&str>`/`Vec<String>` for `[*]` paths,
///   `Option<serde_json::Value>`, `Option<Result<Quantity, QuantityError>>`);
/// - `#[conditions("prefix")]`: a `Vec<Condition>` read from the six
///   `prefix[*].…` paths of `condition_paths(prefix)`;
/// - `#[pod_resources("resource")]`: a `PodResources` read from the paths
///   of `pod_resource_paths(resource)`.
///
/// Generates `View::FIELDS` (every path, in field order) and a `Copy`
/// struct `<Name>Fields` (the struct's visibility) with `resolve(&watch)`,
/// `watch()` and `read(&object)`.
#[proc_macro_derive(View, attributes(field, conditions, pod_resources))]
pub fn derive_view(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// What one struct field reads.
enum Source {
    /// One path, read through `FieldValue`.
    Path(LitStr),
    /// A conditions list at a prefix.
    Conditions(LitStr),
    /// A pod's requests of one resource.
    PodResources(LitStr),
}

impl Source {
    /// The projection paths, as the SDK's helpers spell them.
    fn paths(&self) -> Vec<String> {
        match self {
            Source::Path(p) => vec![p.value()],
            Source::Conditions(prefix) => [
                "type",
                "status",
                "observedGeneration",
                "lastTransitionTime",
                "reason",
                "message",
            ]
            .iter()
            .map(|f| format!("{}[*].{f}", prefix.value()))
            .collect(),
            Source::PodResources(r) => {
                let r = r.value();
                vec![
                    "spec.nodeName".to_string(),
                    "status.phase".to_string(),
                    format!("spec.containers[*].resources.requests['{r}']"),
                    format!("spec.containers[*].resources.limits['{r}']"),
                    "spec.initContainers[*].restartPolicy".to_string(),
                    format!("spec.initContainers[*].resources.requests['{r}']"),
                    format!("spec.initContainers[*].resources.limits['{r}']"),
                    format!("spec.overhead['{r}']"),
                ]
            }
        }
    }
}

/// The one source attribute of a field; an error for none, two, or a
/// malformed one.
fn source(field: &syn::Field) -> syn::Result<Source> {
    let mut found = None;
    for attr in &field.attrs {
        let kind = ["field", "conditions", "pod_resources"]
            .into_iter()
            .find(|k| attr.path().is_ident(k));
        let Some(kind) = kind else { continue };
        if found.is_some() {
            return Err(syn::Error::new_spanned(
                attr,
                "a view field reads exactly one source: one of #[field], #[conditions], #[pod_resources]",
            ));
        }
        let lit: LitStr = attr.parse_args()?;
        if lit.value().is_empty() {
            return Err(syn::Error::new_spanned(lit, "empty path"));
        }
        found = Some(match kind {
            "field" => Source::Path(lit),
            "conditions" => Source::Conditions(lit),
            _ => Source::PodResources(lit),
        });
    }
    found.ok_or_else(|| {
        syn::Error::new_spanned(
            field,
            "every field of a View needs #[field(\"path\")], #[conditions(\"prefix\")] or #[pod_resources(\"resource\")]",
        )
    })
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "View can only be derived for a struct with named fields",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "View can only be derived for a struct with named fields",
        ));
    };
    let mut lifetime = None;
    for param in &input.generics.params {
        match param {
            GenericParam::Lifetime(l) if lifetime.is_none() => lifetime = Some(l.lifetime.clone()),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "a View takes at most one lifetime parameter (the snapshot's) and no type or const parameters",
                ))
            }
        }
    }
    let sdk = quote!(::wasmctrl_guest_sdk);
    let name = &input.ident;
    let vis = &input.vis;
    let handles = format_ident!("{}Fields", name);
    let a = lifetime
        .clone()
        .unwrap_or_else(|| syn::Lifetime::new("'a", Span::call_site()));
    let (impl_generics, self_ty) = match &lifetime {
        Some(l) => (quote!(<#l>), quote!(#name<#l>)),
        None => (quote!(<'a>), quote!(#name)),
    };

    let mut paths = Vec::new();
    let mut members = Vec::new();
    let mut resolves = Vec::new();
    let mut reads = Vec::new();
    for field in &named.named {
        let ident: &Ident = field
            .ident
            .as_ref()
            .ok_or_else(|| syn::Error::new_spanned(field, "View fields must be named"))?;
        let ty = &field.ty;
        let source = source(field)?;
        paths.extend(source.paths());
        match &source {
            Source::Path(path) => {
                members.push(quote!(#ident: #sdk::Field));
                resolves.push(quote!(#ident: watch.field(#path)?));
                reads.push(quote!(
                    #ident: <#ty as #sdk::view::FieldValue<#a>>::read(object, self.#ident)
                ));
            }
            Source::Conditions(prefix) => {
                members.push(quote!(#ident: #sdk::ConditionFields));
                resolves.push(quote!(#ident: #sdk::ConditionFields::resolve(watch, #prefix)?));
                reads.push(quote!(#ident: #sdk::view::conditions(&self.#ident, object)));
            }
            Source::PodResources(resource) => {
                members.push(quote!(#ident: #sdk::pod_request::PodResourceFields));
                resolves.push(quote!(
                    #ident: #sdk::pod_request::PodResourceFields::resolve(watch, #resource)?
                ));
                reads.push(quote!(#ident: self.#ident.read(object)));
            }
        }
    }
    let handles_doc = format!(
        "The resolved handles of [`{name}`]'s paths in one watch (see `View`): \
         `resolve` once per reconcile, then `read` each object."
    );
    Ok(quote! {
        #[doc = #handles_doc]
        #[derive(Clone, Copy, Debug)]
        #vis struct #handles {
            watch: #sdk::snapshot::WatchId,
            #(#members,)*
        }

        impl #handles {
            /// Resolves every path in `watch`; an error names the first
            /// path the watch does not project.
            #vis fn resolve(
                watch: &#sdk::WatchSchema<'_>,
            ) -> ::std::result::Result<Self, #sdk::SchemaError> {
                ::std::result::Result::Ok(#handles {
                    watch: watch.id(),
                    #(#resolves,)*
                })
            }

            /// The watch the handles were resolved in.
            #vis fn watch(&self) -> #sdk::snapshot::WatchId {
                self.watch
            }

            /// The view of `object` (an object of another watch reads as
            /// all absent).
            #vis fn read<#a>(&self, object: &#sdk::Object<#a>) -> #self_ty {
                #name {
                    #(#reads,)*
                }
            }
        }

        impl #impl_generics #sdk::View<#a> for #self_ty {
            const FIELDS: &'static [&'static str] = &[#(#paths),*];
            type Fields = #handles;

            fn resolve(
                watch: &#sdk::WatchSchema<'_>,
            ) -> ::std::result::Result<#handles, #sdk::SchemaError> {
                #handles::resolve(watch)
            }

            fn read(fields: &#handles, object: &#sdk::Object<#a>) -> Self {
                fields.read(object)
            }
        }
    })
}
