"""kaisched's own reading of plain kubeconfigs and of a pod's service account,
held to the `kubernetes` client's loader: where it answers, it answers as the
loader does; what it does not read, it leaves to the loader (None)."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaisched.cluster.access import TOKEN_REFRESH_SECONDS, Access, TokenFile, read_access
from kaisched.cluster.kube import access_of, load_access, load_configuration
from kaisched.errors import MissingConfigFile

CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHckey\n-----END EC PRIVATE KEY-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(folder: Path, cluster: dict[str, Any], user: dict[str, Any] | None,
               *, extra_contexts: list[dict[str, Any]] = (), **top: Any) -> str:
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "c", "cluster": cluster}],
           "users": [{"name": "u", "user": user}] if user is not None else [],
           "contexts": [{"name": "x", "context": {"cluster": "c",
                                                  **({"user": "u"} if user is not None else {})}},
                        *extra_contexts],
           "current-context": "x", **top}
    path = folder / "config"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _content(file: str | None, data: str | bytes | None) -> bytes | None:
    if data is not None:
        return data.encode() if isinstance(data, str) else data
    return Path(file).read_bytes() if file else None


def as_seen(access: Access) -> dict[str, Any]:
    """What a connection is made of, files and data alike by their content."""
    e = access.endpoint
    return {"url": e.url, "verify": e.verify, "check_name": e.check_name,
            "server_name": e.server_name, "proxy": access.proxy,
            "ca": _content(e.ca_file, e.ca_data), "cert": _content(e.cert_file, e.cert_data),
            "key": _content(e.key_file, e.key_data),
            "credentials": {k.lower(): v for k, v in access.credentials().items()}}


def library(path: str, context: str | None = None) -> Access:
    return access_of(load_configuration(path, context))


PLAIN = {
    "data": ({"server": "https://10.0.0.1:6443/", "certificate-authority-data": b64(CA)},
             {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}),
    "token": ({"server": "https://api.example:443", "certificate-authority-data": b64(CA),
               "tls-server-name": "kubernetes.default"}, {"token": "s3cr3t"}),
    "insecure": ({"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
                 {"token": "t"}),
    "plain http": ({"server": "http://127.0.0.1:8080"}, None),
    "no user entry": ({"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(CA)},
                      None),
    "empty token": ({"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(CA)},
                    {"token": "", "client-certificate-data": b64(CERT),
                     "client-key-data": b64(KEY)}),
}


@pytest.mark.parametrize("cluster, user", PLAIN.values(), ids=PLAIN.keys())
def test_a_plain_kubeconfig_is_read_as_the_library_reads_it(
        tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None) -> None:
    path = kubeconfig(tmp_path, cluster, user)
    ours = read_access(path, None)
    assert ours is not None
    assert as_seen(ours) == as_seen(library(path))


def test_files_are_found_beside_the_kubeconfig(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pki").mkdir()
    for name, text in (("ca.crt", CA), ("admin.crt", CERT), ("admin.key", KEY),
                       ("token", "from-a-file\n")):
        (tmp_path / "pki" / name).write_text(text)
    path = kubeconfig(tmp_path, {"server": "https://127.0.0.1:6443",
                                 "certificate-authority": "pki/ca.crt"},
                      {"client-certificate": "pki/admin.crt", "client-key": "./pki/admin.key",
                       "tokenFile": "pki/token"})
    monkeypatch.chdir("/")              # relative to the kubeconfig, not to where we run
    ours = read_access(path, None)
    assert ours is not None
    assert ours.endpoint.ca_file == str(tmp_path / "pki" / "ca.crt")
    seen, theirs = as_seen(ours), as_seen(library(path))
    # The library keeps the file's newline in the header (which no request could
    # send); the token itself is the same.
    assert seen.pop("credentials") == {"authorization": "Bearer from-a-file"}
    assert theirs.pop("credentials") == {"authorization": "Bearer from-a-file\n"}
    assert seen == theirs


def test_the_context_named_and_the_first_entry_of_a_name(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "https://a:1", "insecure-skip-tls-verify": True},
                      {"token": "a"},
                      extra_contexts=[{"name": "second", "context": {"cluster": "d",
                                                                     "user": "v"}}])
    doc = yaml.safe_load(Path(path).read_text())
    doc["clusters"] += [{"name": "d", "cluster": {"server": "http://d:2"}},
                        {"name": "d", "cluster": {"server": "http://ignored:3"}}]
    doc["users"] += [{"name": "v", "user": {"token": "v"}}]
    Path(path).write_text(yaml.safe_dump(doc))
    for context in (None, "x", "second"):
        ours = read_access(path, context)
        assert ours is not None
        assert as_seen(ours) == as_seen(library(path, context))
    assert read_access(path, "second").endpoint.url == "http://d:2"   # type: ignore[union-attr]


NOT_PLAIN = {
    "exec": ({"server": "https://a:1"}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                  "command": "get-token"}}),
    "auth provider": ({"server": "https://a:1"}, {"auth-provider": {"name": "oidc",
                                                                   "config": {}}}),
    "basic auth": ({"server": "https://a:1"}, {"username": "u", "password": "p"}),
    "proxy": ({"server": "https://a:1", "proxy-url": "http://proxy:3128"}, {"token": "t"}),
    "a CA file not there": ({"server": "https://a:1", "certificate-authority": "nowhere.crt"},
                            None),
    "data not base64": ({"server": "https://a:1", "certificate-authority-data": "%%%"}, None),
    "no server": ({"insecure-skip-tls-verify": True}, None),
    "verify as text": ({"server": "https://a:1", "insecure-skip-tls-verify": "false"}, None),
}


@pytest.mark.parametrize("cluster, user", NOT_PLAIN.values(), ids=NOT_PLAIN.keys())
def test_what_is_not_plain_is_left_to_the_library(
        tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None) -> None:
    assert read_access(kubeconfig(tmp_path, cluster, user), None) is None


def test_a_token_is_taken_before_a_command(tmp_path: Path) -> None:
    # The loader's order: a token written in the kubeconfig wins over an exec plugin.
    path = kubeconfig(tmp_path, {"server": "http://a:1"},
                      {"token": "t", "exec": {"command": "never-run"}})
    ours = read_access(path, None)
    assert ours is not None and as_seen(ours) == as_seen(library(path))


def test_files_that_are_odd_or_missing_are_the_librarys_to_report(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    assert read_access(missing, None) is None
    with pytest.raises(MissingConfigFile, match="does not exist"):
        load_access(missing)
    (tmp_path / "list").write_text("- a\n- b\n")
    assert read_access(str(tmp_path / "list"), None) is None
    no_context = kubeconfig(tmp_path, {"server": "http://a:1"}, None)
    assert read_access(no_context, "absent") is None


def test_the_default_kubeconfig_is_kubeconfig_or_home(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = kubeconfig(tmp_path, {"server": "http://from-env:1"}, None)
    env = {"KUBECONFIG": path}
    found = read_access(None, None, environ=env, service_account=tmp_path / "none")
    assert found is not None and found.endpoint.url == "http://from-env:1"
    # Several files are merged by the library's loader, not here.
    assert read_access(None, None, environ={"KUBECONFIG": f"{path}:{path}"},
                       service_account=tmp_path / "none") is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(Path(path).read_text().replace("from-env",
                                                                              "home"))
    monkeypatch.setenv("HOME", str(tmp_path))
    found = read_access(None, None, environ={}, service_account=tmp_path / "none")
    assert found is not None and found.endpoint.url == "http://home:1"


def _service_account(folder: Path, token: str = "first\n") -> Path:
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_text(CA)
    return folder


def test_in_a_pod_the_service_account_is_read(tmp_path: Path) -> None:
    account = _service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    found = read_access(None, None, environ=env, service_account=account)
    assert found is not None
    assert found.endpoint.url == "https://10.96.0.1:443"
    assert found.endpoint.ca_file == str(account / "ca.crt")
    assert found.credentials() == {"Authorization": "Bearer first"}
    six = {**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}
    assert read_access(None, None, environ=six,
                       service_account=account).endpoint.url == "https://[fd00::1]:443"  # type: ignore[union-attr]
    # A kubeconfig named is read even in a pod, as kubectl does.
    path = kubeconfig(tmp_path, {"server": "http://named:1"}, None)
    assert read_access(path, None, environ=env,
                       service_account=account).endpoint.url == "http://named:1"  # type: ignore[union-attr]


def test_outside_a_pod_or_without_its_files_the_kubeconfig_is_read(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {"server": "http://kubeconfig:1"}, None)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
           "KUBECONFIG": path}
    empty = _service_account(tmp_path / "empty", token="")
    for account in (tmp_path / "absent", empty):
        found = read_access(None, None, environ=env, service_account=account)
        assert found is not None and found.endpoint.url == "http://kubeconfig:1"
    found = read_access(None, None, environ={**env, "KUBERNETES_SERVICE_PORT": ""},
                        service_account=_service_account(tmp_path / "sa"))
    assert found is not None and found.endpoint.url == "http://kubeconfig:1"


def test_a_service_accounts_token_is_read_again_when_due(tmp_path: Path) -> None:
    account = _service_account(tmp_path / "sa")
    now = [0.0]
    token = TokenFile(str(account / "token"), clock=lambda: now[0])
    assert token() == {"Authorization": "Bearer first"}
    (account / "token").write_text("rotated")
    now[0] = TOKEN_REFRESH_SECONDS - 1
    assert token() == {"Authorization": "Bearer first"}        # not due yet
    now[0] = TOKEN_REFRESH_SECONDS
    assert token() == {"Authorization": "Bearer rotated"}
    (account / "token").unlink()                                # mid-rotation
    now[0] = 2 * TOKEN_REFRESH_SECONDS
    assert token() == {"Authorization": "Bearer rotated"}      # the last one read, kept


def test_a_token_file_that_is_not_text_is_the_librarys_to_report(tmp_path: Path) -> None:
    account = _service_account(tmp_path / "sa")
    (account / "token").write_bytes(b"\xff\xfe not utf-8")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert read_access(None, None, environ=env, service_account=account) is None
    token = TokenFile(str(account / "token"))
    assert token() == {}                # none read yet: sent without one, the 401 says so
