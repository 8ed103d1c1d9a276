"""The host snapshot the system and reliability tests compare sees what the guest changed, and only that.

The guest's / is an overlay whose lower layer is this machine's own /, shared with whoever works here: a
package installed on the controller while the tests run adds files under /etc/systemd/system of the merged
tree. The snapshot reads the overlay's upper layer (what the guest wrote), so such a change must not show,
while a change made inside the guest must.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.system.support import TestHost, etc_snapshot

pytestmark = pytest.mark.timeout(120)


def test_the_controllers_own_etc_changing_does_not_show(testhost: TestHost) -> None:
    before = etc_snapshot(testhost)
    probe = Path("/etc/systemd/system") / f"specsweep-lower-layer-probe-{uuid.uuid4().hex[:8]}.txt"
    probe.write_text("written on the controller, under the guest's lower layer\n")
    try:
        seen = testhost.admin(f"cat {probe}", check=False).stdout
        after = etc_snapshot(testhost)
    finally:
        probe.unlink()
    assert seen.startswith("written on the controller")  # the guest does see the file in its merged tree
    assert after == before


def test_a_change_made_in_the_guest_shows(testhost: TestHost) -> None:
    before = etc_snapshot(testhost)
    name = f"/etc/systemd/system/specsweep-guest-probe-{uuid.uuid4().hex[:8]}.conf"
    testhost.admin(f"echo probe > {name}")
    try:
        during = etc_snapshot(testhost)
    finally:
        testhost.admin(f"rm -f {name}")
    assert during != before and name.removeprefix("/") in during
    # Deleting what the guest made removes it from the upper layer again.
    assert etc_snapshot(testhost) == before


def test_a_secret_file_shows_without_its_content(testhost: TestHost) -> None:
    before = etc_snapshot(testhost)
    testhost.admin("install -d -m 700 /run/specsweep && umask 077 && echo S3CRET-PROBE > /run/specsweep/probe.env")
    try:
        during = etc_snapshot(testhost)
    finally:
        testhost.admin("rm -f /run/specsweep/probe.env; rmdir /run/specsweep")
    assert "./probe.env f 600" in during and "S3CRET-PROBE" not in during
    assert etc_snapshot(testhost) == before
