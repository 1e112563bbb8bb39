//! The shape of a printer: a [`Column`] definition, the columns most
//! kinds share (Name, Age, the containers' wide pair) and a kind's
//! [`Printer`] (its columns and row functions). Shapes only; it never
//! knows a kind.

use serde_json::{json, Value};

use super::descriptions;

/// One column definition (`metav1.TableColumnDefinition`).
pub(crate) struct Column {
    pub(super) name: &'static str,
    pub(super) ty: &'static str,
    /// 1 for the wide (`-o wide`) columns.
    pub(super) priority: u8,
    pub(super) description: &'static str,
}

/// A column shown by default.
pub(super) const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        priority: 0,
        description,
    }
}

/// A wide column (priority 1).
pub(super) const fn wide(
    name: &'static str,
    ty: &'static str,
    description: &'static str,
) -> Column {
    Column {
        name,
        ty,
        priority: 1,
        description,
    }
}

/// The Name column every printer starts with.
pub(super) const NAME: Column = Column {
    name: "Name",
    ty: "string",
    priority: 0,
    description: descriptions::NAME_DESCRIPTION,
};

/// The Age column (`translateTimestampSince(creationTimestamp)`).
pub(super) const AGE: Column = col("Age", "string", descriptions::AGE);

/// `layoutContainerCells`' two wide columns.
pub(super) const CONTAINERS: Column = wide(
    "Containers",
    "string",
    "Names of each container in the template.",
);
pub(super) const IMAGES: Column = wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);

/// A kind's printer: its columns and the function computing one row's
/// cells (as many as columns, wide ones included).
pub(crate) struct Printer {
    pub(super) columns: &'static [Column],
    pub(super) row: fn(&Value) -> Vec<Value>,
    /// The row's `conditions`, for the kinds whose rows have any.
    pub(super) conditions: Option<fn(&Value) -> Option<Value>>,
}

impl Printer {
    /// A printer whose rows have no `conditions`.
    pub(super) const fn new(columns: &'static [Column], row: fn(&Value) -> Vec<Value>) -> Self {
        Printer {
            columns,
            row,
            conditions: None,
        }
    }

    /// The Table's `columnDefinitions`.
    pub(crate) fn definitions(&self) -> Vec<Value> {
        self.columns
            .iter()
            .map(|c| {
                let format = if c.name == "Name" { "name" } else { "" };
                json!({"name": c.name, "type": c.ty, "format": format,
                    "description": c.description, "priority": c.priority})
            })
            .collect()
    }

    /// One row's cells for `obj`.
    pub(crate) fn cells(&self, obj: &Value) -> Vec<Value> {
        (self.row)(obj)
    }

    /// One row's `conditions` for `obj`, if it has any.
    pub(crate) fn row_conditions(&self, obj: &Value) -> Option<Value> {
        self.conditions.and_then(|c| c(obj))
    }
}
