"""What keeps a slot file inside --slot-save-path beyond the name check llama-server makes (the
names themselves are compared with llama-server's answers in test_wire_parity_admin): a symbolic
link in the directory is not followed out of it, and upstream's reading of the slot id."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact.server.slots.wire import parse_slot_id, slot_path, valid_filename


def test_a_link_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    save_dir, outside = tmp_path / "slots", tmp_path / "outside"
    save_dir.mkdir()
    outside.mkdir()
    (save_dir / "link").symlink_to(outside / "target.bin")
    assert valid_filename("link")            # the name alone passes upstream's check
    with pytest.raises(ValueError):
        slot_path(save_dir, "link")
    assert slot_path(save_dir, "plain.bin") == save_dir.resolve() / "plain.bin"


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "a\\b", "..", ".", "", "\ud800", "x" * 256])
def test_names_leaving_the_directory_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        slot_path(tmp_path, name)


def test_slot_ids_read_as_std_stoi_then_wrapped() -> None:
    assert parse_slot_id("1", 2) == (1, 1)
    assert parse_slot_id(" +3xyz", 2) == (3, 1)
    assert parse_slot_id("-1", 3) == (-1, (2**64 - 1) % 3)   # size_t arithmetic, as upstream
    assert parse_slot_id("x", 2) is None
    assert parse_slot_id(str(2**31), 2) is None
