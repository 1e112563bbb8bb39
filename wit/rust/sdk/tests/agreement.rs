//! This SDK's `World` against the relation agreement table
//! (`wit/agreement/relations.json`): every change wakes the keys the table
//! says and every key's snapshot holds the objects it says, the same table
//! the host's relations and the other SDKs' worlds are held to.

#![allow(clippy::unwrap_used)]

use wasmctrl_guest_sdk::testing::agreement::Table;
use wasmctrl_guest_sdk::Presence;

fn table() -> Table {
    Table::parse(include_str!("../../../agreement/relations.json")).unwrap()
}

#[test]
fn every_change_wakes_the_keys_the_agreement_table_says() {
    let table = table();
    for change in &table.changes {
        let o = &change.object;
        assert_eq!(
            table.sdk_wakes(change).unwrap(),
            change.wakes,
            "change {}:{}/{}",
            o.watch,
            o.namespace,
            o.name
        );
    }
}

#[test]
fn every_key_s_snapshot_holds_the_objects_the_agreement_table_says() {
    let table = table();
    for entry in &table.snapshots {
        assert_eq!(
            table.sdk_holds(entry).unwrap(),
            entry.holds,
            "key {}",
            entry.key
        );
    }
}

#[test]
fn a_departed_primary_s_snapshot_holds_what_the_agreement_table_says() {
    let table = table();
    for entry in &table.departed {
        assert!(
            table.departing(entry).is_some(),
            "{} is in the world",
            entry.key
        );
        let (presence, holds) = table.sdk_departed_holds(entry).unwrap();
        assert_eq!(presence, Some(Presence::Gone), "departed {}", entry.key);
        assert_eq!(holds, entry.holds, "departed {}", entry.key);
    }
}
