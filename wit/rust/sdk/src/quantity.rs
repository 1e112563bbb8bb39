//! Kubernetes resource quantities for guests: parsing as apimachinery's
//! `resource.ParseQuantity` does and rounding as `Quantity.Value()` does.
//! The one parser lives in `wasmctrl_kube_rules::quantity` (shared with the
//! host and the embedded API server, tests included); this module only
//! gives guests its amount-side API under the SDK's name.

pub use wasmctrl_kube_rules::quantity::{
    parse_quantity, quantity_value, truncate_chars, Quantity, QuantityError, QuantityErrorKind,
    Result,
};
