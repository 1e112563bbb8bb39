"""This SDK's World against the relation agreement table
(wit/agreement/relations.json): the answers the host, the Rust SDK and the
TypeScript SDK are held to as well."""

import json
import pathlib

import pytest

from wasmctrl import Presence
from wasmctrl.testing import agreement

TABLE = json.loads((pathlib.Path(__file__).parents[2] / "agreement" / "relations.json").read_text())


def name(case):
    return f"{case['watch']}:{case['namespace']}/{case['name']}"


@pytest.mark.parametrize("change", TABLE["changes"], ids=lambda c: name(c["object"]))
def test_every_change_wakes_the_keys_the_table_says(change):
    assert agreement.wakes(TABLE, change) == change["wakes"]


@pytest.mark.parametrize("entry", TABLE["snapshots"], ids=lambda e: e["key"])
def test_every_key_s_snapshot_holds_the_objects_the_table_says(entry):
    assert agreement.holds(TABLE, entry) == entry["holds"]


@pytest.mark.parametrize("entry", TABLE["departed"], ids=lambda e: e["key"])
def test_a_departed_primary_s_snapshot_holds_what_the_table_says(entry):
    presence, holds = agreement.departed(TABLE, entry)
    assert presence is Presence.GONE
    assert holds == entry["holds"]


def test_the_table_is_not_vacuous():
    assert sum(len(c["wakes"]) for c in TABLE["changes"]) > 0
    assert sum(len(e["holds"]) for e in TABLE["snapshots"]) > 0
    assert sum(len(e["holds"]) for e in TABLE["departed"]) > 0
