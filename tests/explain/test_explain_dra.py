"""`kaisched explain` names the claim's request and the selectors no node could satisfy."""
from __future__ import annotations

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import default_config
from kaisched.tools.explain import explain
from tests.builders.dra import objects

SELECTOR = 'device.attributes["gpu.example.com"].model == "H100"'


def test_explain_names_the_request_and_selector() -> None:
    objs = objects([2], [(1, 1, False)])
    claim = next(o for o in objs if o["kind"] == "ResourceClaim")
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": SELECTOR}}]
    for pool in (o for o in objs if o["kind"] == "ResourceSlice"):
        for device in pool["spec"]["devices"]:      # an A100: the selector says no (a device
            device["attributes"]["model"] = {"string": "A100"}  # without it is an error)
    registry = register_builtins()
    text = "\n".join(explain(objs, "default/gang-0", default_config(registry), registry))
    assert "node cannot allocate the pod's ResourceClaims" in text
    assert (f"ResourceClaim default/gang-0-0 request gpu (DeviceClass gpu, selector "
            f"'device.driver == \"gpu.example.com\"', selector {SELECTOR!r}): "
            f"no node has 1 matching device(s) free (the best has 0)") in text
