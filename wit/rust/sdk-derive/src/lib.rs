//! `#[derive(View)]`: a struct whose fields name their projection paths
//! once (`#[field("spec.message")]`, `#[conditions("status.conditions")]`,
//! `#[pod_resources("nvidia.com/gpu")]`) becomes a `wasmctrl_guest_sdk::View`
//! with a companion `<Name>Fields` of resolved handles; a path holding
//! `{name}` makes it a *configured* view whose paths take that parameter at
//! run time (`Name::fields(resource)`). This crate only
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
///   `Option<f64>`, `Vec<&str>`/`Vec<String>`/`Vec<i64>` for `[*]` paths,
///   `BTreeMap<String, String>` for a map of strings,
///   `Option<serde_json::Value>`, `Option<Result<Quantity, QuantityError>>`);
/// - `#[conditions("prefix")]`: a `Vec<Condition>` read from the six
///   `prefix[*].…` paths of `condition_paths(prefix)`;
/// - `#[pod_resources("resource")]`: a `PodResources` read from the paths
///   of `pod_resource_paths(resource)`.
///
/// Generates `View::FIELDS` (every path, in field order) and a `Copy`
/// struct `<Name>Fields` (the struct's visibility) with `resolve(&watch)`,
/// `watch()` and `read(&object)`.
///
/// A path, prefix or resource holding `{name}` (format syntax: `{{` and
/// `}}` for literal braces) is a template: the view is then *configured*
/// by the parameters it names, in order of first use, each a `&str` known
/// at `describe` (a configured resource). It has no `View` impl (its
/// paths are not constants); instead `Name::fields(params..)` returns its
/// paths and `<Name>Fields::resolve(&watch, params..)` resolves them.
#[proc_macro_derive(View, attributes(field, conditions, pod_resources))]
pub fn derive_view(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The parameters a source literal's `{name}` placeholders name, in order
/// (`{{` and `}}` are literal braces); None when it holds no brace at all.
fn placeholders(lit: &LitStr) -> syn::Result<Option<Vec<String>>> {
    let text = lit.value();
    if !text.contains(['{', '}']) {
        return Ok(None);
    }
    let mut names = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
            }
            ('{', _) => {
                let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                let ok = syn::parse_str::<Ident>(&name).is_ok()
                    && !matches!(name.as_str(), "watch" | "paths");
                if !ok {
                    return Err(syn::Error::new_spanned(
                        lit,
                        format!("{{{name}}} is not a parameter: write {{name}} with a Rust identifier other than `watch` and `paths`, or {{{{ and }}}} for literal braces"),
                    ));
                }
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            ('}', _) => {
                return Err(syn::Error::new_spanned(
                    lit,
                    "unmatched `}`: write }} for a literal brace",
                ))
            }
            _ => {}
        }
    }
    Ok(Some(names))
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
    /// The literal the attribute holds.
    fn literal(&self) -> &LitStr {
        match self {
            Source::Path(l) | Source::Conditions(l) | Source::PodResources(l) => l,
        }
    }

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

    let mut sources = Vec::new();
    let mut params: Vec<String> = Vec::new();
    let mut configured = false;
    for field in &named.named {
        let source = source(field)?;
        if let Some(names) = placeholders(source.literal())? {
            configured = true;
            for name in names {
                if !params.contains(&name) {
                    params.push(name);
                }
            }
        }
        sources.push((field, source));
    }

    let mut paths = Vec::new();
    let mut runtime_paths = Vec::new();
    let mut members = Vec::new();
    let mut resolves = Vec::new();
    let mut reads = Vec::new();
    for (field, source) in &sources {
        let ident: &Ident = field
            .ident
            .as_ref()
            .ok_or_else(|| syn::Error::new_spanned(field, "View fields must be named"))?;
        let ty = &field.ty;
        // A configured view's literals are formatted with the parameters
        // each names (all of them `&str` arguments in scope).
        let lit = source.literal();
        let value = match placeholders(lit)? {
            Some(names) => {
                let names: Vec<Ident> = names.iter().map(|n| format_ident!("{}", n)).collect();
                quote!(::std::format!(#lit, #(#names = #names),*))
            }
            None => quote!(::std::string::String::from(#lit)),
        };
        let path = if configured {
            quote!(&#value)
        } else {
            quote!(#lit)
        };
        paths.extend(source.paths());
        runtime_paths.push(match source {
            Source::Path(_) => quote!(paths.push(#value)),
            Source::Conditions(_) => {
                quote!(paths.extend(#sdk::condition::condition_paths(&#value)))
            }
            Source::PodResources(_) => {
                quote!(paths.extend(#sdk::pod_request::pod_resource_paths(&#value)))
            }
        });
        match source {
            Source::Path(_) => {
                members.push(quote!(#ident: #sdk::Field));
                resolves.push(quote!(#ident: watch.field(#path)?));
                reads.push(quote!(
                    #ident: <#ty as #sdk::view::FieldValue<#a>>::read(object, self.#ident)
                ));
            }
            Source::Conditions(_) => {
                members.push(quote!(#ident: #sdk::ConditionFields));
                resolves.push(quote!(#ident: #sdk::ConditionFields::resolve(watch, #path)?));
                reads.push(quote!(#ident: #sdk::view::conditions(&self.#ident, object)));
            }
            Source::PodResources(_) => {
                members.push(quote!(#ident: #sdk::pod_request::PodResourceFields));
                resolves.push(quote!(
                    #ident: #sdk::pod_request::PodResourceFields::resolve(watch, #path)?
                ));
                reads.push(quote!(#ident: self.#ident.read(object)));
            }
        }
    }
    let handles_doc = format!(
        "The resolved handles of [`{name}`]'s paths in one watch (see `View`): \
         `resolve` once per reconcile, then `read` each object."
    );
    let params: Vec<Ident> = params.iter().map(|n| format_ident!("{}", n)).collect();
    let handles_impl = quote! {
        impl #handles {
            /// Resolves every path in `watch`; an error names the first
            /// path the watch does not project.
            #vis fn resolve(
                watch: &#sdk::WatchSchema<'_>,
                #(#params: &str,)*
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
    };
    // The handles struct and its methods, for both kinds of view.
    let handles_def = quote! {
        #[doc = #handles_doc]
        #[derive(Clone, Copy, Debug)]
        #vis struct #handles {
            watch: #sdk::snapshot::WatchId,
            #(#members,)*
        }

        #handles_impl
    };
    if configured {
        return Ok(quote! {
            #handles_def

            impl #impl_generics #self_ty {
                /// Every projection path the view reads with these
                /// parameters, in field order: pass it to `Watch::fields`.
                #vis fn fields(#(#params: &str),*) -> ::std::vec::Vec<::std::string::String> {
                    let mut paths = ::std::vec::Vec::new();
                    #(#runtime_paths;)*
                    paths
                }
            }
        });
    }
    Ok(quote! {
        #handles_def

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
