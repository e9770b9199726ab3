"""HTTP answers and transport failures map onto the errors hierarchy, with
messages that name the verb, the kind, the object and the API's own words;
configuration problems are one ConfigError sentence."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Callable

import kmock
import pytest
import yaml
from kubernetes import config as k8s_config

from kaisched.cluster.kinds import NODE, POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import (
    ApiError,
    ConfigError,
    ConflictError,
    GoneError,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
)
from tests.builders.proxy import ConnectProxy
from tests.builders.wire import PODS, Emulator, api_client, build_pod

STATUSES = [
    pytest.param(404, NotFoundError, id="404-not-found"),
    pytest.param(409, ConflictError, id="409-conflict"),
    pytest.param(410, GoneError, id="410-gone"),
    pytest.param(401, PermanentApiError, id="401-unauthorized"),
    pytest.param(403, PermanentApiError, id="403-forbidden"),
    pytest.param(422, PermanentApiError, id="422-invalid"),
    pytest.param(429, TransientApiError, id="429-throttled"),
    pytest.param(500, TransientApiError, id="500-server-error"),
    pytest.param(503, TransientApiError, id="503-unavailable"),
]
CALLS: dict[str, Callable[[KubeCluster], object]] = {
    "patch Pod default/trouble": lambda c: c.patch(POD, "default", "trouble", {"spec": {}}),
    "patch status of Pod default/trouble":
        lambda c: c.patch_status(POD, "default", "trouble", {"phase": "Failed"}),
    "delete Pod default/trouble": lambda c: c.delete(POD, "default", "trouble"),
    "bind Pod default/trouble to n1": lambda c: c.bind("default", "trouble", "", "n1"),
    "evict Pod default/trouble": lambda c: c.evict("default", "trouble"),
    "create Pod default/trouble": lambda c: c.create(build_pod("trouble")),
}


def _answer(apiserver: Emulator, code: int, message: str, exists: bool = True) -> None:
    """Every request about pods/trouble (its creation included) gets code. The
    emulator checks existence before any reaction runs, so the pod is put in
    place (silently) for the requests that need it, and left out for create."""
    status = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
              "reason": "Testing", "message": message}
    pods = kmock.resource(PODS)

    def install() -> None:
        if exists:
            apiserver.emu.objects[pods, "default", "trouble"] = build_pod("trouble")
            apiserver.emu.override[pods, kmock.name("trouble")] << code << status
        else:                   # a creation names the object in its body, not its URL
            apiserver.emu.override["post", pods] << code << status
    apiserver.call(install)


@pytest.mark.parametrize("verb", list(CALLS))
@pytest.mark.parametrize(("code", "error"), STATUSES)
def test_status_maps_to_error(apiserver: Emulator, cluster: KubeCluster, code: int,
                              error: type[ApiError], verb: str) -> None:
    _answer(apiserver, code, f"the API says {code}", exists=not verb.startswith("create"))
    with pytest.raises(error) as err:
        CALLS[verb](cluster)
    assert type(err.value) is error
    assert err.value.status == code
    assert str(err.value) == f"{verb}: the API says {code} (HTTP {code})"


@pytest.mark.parametrize(("code", "error"), [p for p in STATUSES if p.values[0] != 404])
def test_get_raises_for_anything_but_not_found(apiserver: Emulator, cluster: KubeCluster,
                                               code: int, error: type[ApiError]) -> None:
    _answer(apiserver, code, "no")
    with pytest.raises(error, match=r"^get Pod default/trouble: no \(HTTP \d+\)$"):
        cluster.get(POD, "default", "trouble")


def test_a_body_that_is_not_a_status_still_gives_a_message(apiserver: Emulator,
                                                           cluster: KubeCluster) -> None:
    apiserver.call(lambda: apiserver.emu.override[kmock.resource(PODS)]
                   << 502 << b"<html>Bad Gateway</html>")
    with pytest.raises(TransientApiError, match=r"list Pod: <html>Bad Gateway</html> \(HTTP 502\)"):
        cluster.list(POD)


def test_an_answer_that_is_not_json_is_transient(apiserver: Emulator,
                                                 cluster: KubeCluster) -> None:
    apiserver.call(lambda: apiserver.emu.override["list", kmock.resource(PODS)]
                   << 200 << b"<html>a login page</html>")
    with pytest.raises(TransientApiError, match="list Pod: the answer is not JSON"):
        cluster.list(POD)


def test_refused_connection_is_transient() -> None:
    with socket.socket() as sock:               # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = api_client(f"http://127.0.0.1:{port}")
    cluster = KubeCluster(api_client=client, timeout=2.0)
    with pytest.raises(TransientApiError, match="get Node n1: cannot reach the API server") as err:
        cluster.get(NODE, "", "n1")
    assert err.value.status == 0
    with pytest.raises(TransientApiError):
        cluster.subscribe([NODE])
    client.close()


def test_slow_answer_times_out_as_transient(apiserver: Emulator) -> None:
    async def slow() -> dict[str, object]:
        await asyncio.sleep(1.0)
        return {}

    apiserver.call(lambda: apiserver.emu.override[kmock.resource(PODS)] << slow)
    client = api_client(apiserver.url)
    cluster = KubeCluster(api_client=client, timeout=0.2)
    with pytest.raises(TransientApiError, match="list Pod"):
        cluster.list(POD)
    client.close()


# -- configuration ----------------------------------------------------------------

def _kubeconfig(path: Path, server: str, context: str = "emu") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "emu", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "secret-token"}}],
        "contexts": [{"name": context, "context": {"cluster": "emu", "user": "me"}}],
    }))
    return path


def test_a_kubeconfig_reaches_the_server(apiserver: Emulator, tmp_path: Path) -> None:
    cluster = KubeCluster(str(_kubeconfig(tmp_path / "config", apiserver.url)))
    cluster.create(build_pod("p"))
    assert [p["metadata"]["name"] for p in cluster.list(POD)] == ["p"]
    assert _seen_auth(apiserver) == {"Bearer secret-token"}


def _seen_auth(apiserver: Emulator) -> set[str | None]:
    return apiserver.call(lambda: {r.headers.get("Authorization")
                                   for r in apiserver.emu[kmock.resource(PODS)]})


def test_a_kubeconfig_through_a_proxy_tunnels_every_connection(apiserver: Emulator,
                                                               tmp_path: Path) -> None:
    proxy = ConnectProxy()
    proxy.start()
    path = _kubeconfig(tmp_path / "config", apiserver.url)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["proxy-url"] = f"http://127.0.0.1:{proxy.port}"
    path.write_text(yaml.safe_dump(doc))
    cluster = KubeCluster(str(path))
    try:
        cluster.create(build_pod("p"))
        sub = cluster.subscribe([POD])          # a list, then a watch on its own connection
        assert [e.obj["metadata"]["name"] for e in sub.drain()] == ["p"]
    finally:
        cluster.close()
        proxy.close()
    assert len(proxy.asked) >= 2
    assert all(head.startswith(b"CONNECT 127.0.0.1:") for head in proxy.asked)
    assert _seen_auth(apiserver) == {"Bearer secret-token"}


def test_a_proxy_that_is_not_http_is_refused_in_a_sentence(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", "https://127.0.0.1:9")
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["proxy-url"] = "socks5://127.0.0.1:1080"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"^cannot reach the API server https://127.0.0.1:9: "
                                          r"proxy socks5://127.0.0.1:1080: only an http:// "
                                          r"proxy is supported$"):
        KubeCluster(str(path))


def test_a_credential_command_is_run_by_the_kubernetes_loader(apiserver: Emulator,
                                                              tmp_path: Path) -> None:
    # An exec plugin (as cloud CLIs write them): kaisched leaves it to the
    # kubernetes client's loader, whose token goes with every request.
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1",
                  "kind": "ExecCredential", "status": {"token": "from-a-command"}}
    path = _kubeconfig(tmp_path / "config", apiserver.url)
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"] = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"]}}
    path.write_text(yaml.safe_dump(doc))
    cluster = KubeCluster(str(path))
    cluster.create(build_pod("p"))
    cluster.close()
    assert _seen_auth(apiserver) == {"Bearer from-a-command"}


def test_a_kubeconfig_context_is_chosen(apiserver: Emulator, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", apiserver.url, context="second")
    cluster = KubeCluster(str(path), context="second")
    assert cluster.list(PODGROUP) == []


@pytest.mark.parametrize(("content", "context", "expected"), [
    (None, None, r"^kubeconfig .*/missing does not exist$"),
    ("clusters: [unclosed", None, r"^cannot load kubeconfig .*/config: .+"),
    ("just a string", None, r"^cannot load kubeconfig .*/config: .+"),
    ("", None, r"^cannot load kubeconfig .*/config: .+"),
    ("valid", "elsewhere", r"^cannot load kubeconfig .*/config: .*elsewhere.*"),
])
def test_bad_kubeconfig_is_one_config_error(tmp_path: Path, content: str | None,
                                            context: str | None, expected: str) -> None:
    path = tmp_path / ("missing" if content is None else "config")
    if content == "valid":
        _kubeconfig(path, "http://127.0.0.1:9")
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=expected) as err:
        KubeCluster(str(path), context=context)
    assert "\n" not in str(err.value)


def test_no_cluster_and_no_default_kubeconfig(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if k8s_config.KUBE_CONFIG_DEFAULT_LOCATION != "~/.kube/config":
        pytest.skip("KUBECONFIG was set when the kubernetes client was imported")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not os.path.exists(tmp_path / ".kube" / "config")
    with pytest.raises(ConfigError, match=r"^not running in a cluster, and cannot load the "
                                          r"default kubeconfig \(\$KUBECONFIG or ~/.kube/config\): ") as err:
        KubeCluster()
    assert "\n" not in str(err.value)
