"""docs/operations.md as a newcomer follows it (issue 27, point 6): the requirements come first
and say what a wrong clock does; the install recipe works offline from a copied bundle and puts
`schedctl` on PATH; the firewall rules name the configs' ports and hosts; First start runs over
HTTPS on a real node and the new tenant's token is then used."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd.config import load_config
from schedd.dispatch.clock import PROBE_EVERY_S
from schedd.tls import client_context
from tests.certs import CertificateAuthority, NodeCert
from tests.integration.test_docs_commands import sh_blocks
from tests.servers import ADMIN_TOKEN, NodeProcess, make_nodes, running

pytestmark = pytest.mark.slow  # left out of `make check` (docs/testing.md)

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
VM_CONFIGS = sorted((ROOT / "config" / "vm").glob("node*.toml"))
NFT_FILE = ROOT / "config" / "vm" / "schedd.nft"
URL = re.compile(r"\bhttps?://[^\s,;'\"`)]+")


def section(title: str) -> str:
    """The text of `## title`, up to the next `## ` heading."""
    text = OPERATIONS.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def block_with(title: str, word: str) -> list[str]:
    """The one ```sh block of section `title` that contains `word`."""
    found = [b for b in sh_blocks(section(title)) if any(word in line for line in b)]
    assert len(found) == 1, f"one sh block with {word!r} in {title!r}, not {found}"
    return found[0]


def vm_configs() -> list[dict[str, dict[str, object]]]:
    assert len(VM_CONFIGS) == 3, VM_CONFIGS
    return [tomllib.loads(path.read_text()) for path in VM_CONFIGS]


def host_port(address: object) -> tuple[str, int]:
    host, port = str(address).rsplit(":", 1)
    return host, int(port)


# -- requirements ------------------------------------------------------------------------------


def test_the_requirements_come_first_and_say_what_a_wrong_clock_does() -> None:
    text = OPERATIONS.read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[:2] == ["Requirements", "Install"], headings
    needs = section("Requirements")
    for word in ("chrony", "systemd-timesyncd", "timedatectl", "chronyc tracking"):
        assert word in needs, word
    # what schedd does about it, in the code's own terms
    default = load_config(ROOT / "config" / "single.toml")  # no [dispatch]: the defaults
    assert f"`[dispatch] max_clock_offset` ({default.dispatch.max_clock_offset_ms} ms)" in needs
    assert f"every {PROBE_EVERY_S:g} s" in needs
    clock_code = (ROOT / "schedd" / "dispatch" / "clock.py").read_text()
    assert "clock distrusted: " in clock_code and "`clock distrusted: ...`" in needs
    for word in ("stop dispatching", "cluster_unavailable", "/readyz", "schedd_clock_trusted"):
        assert word in needs, word


# -- install: offline, from a copied bundle --------------------------------------------------

VM_SKIPPED = ("useradd ", "systemctl ", "nft -f ", "ufw ")


def on_the_vm(line: str, root: Path) -> str | None:
    """A VM's command run under the fake root `root`, as this user; None for what cannot run
    here (users, systemd, loading firewall rules)."""
    line = re.sub(r"(^|\|\s*)sudo ", r"\1", line)
    if line.startswith(VM_SKIPPED):
        return None
    if line.startswith("nft ") and not (shutil.which("nft") and os.geteuid() == 0):
        return None
    line = re.sub(r" -g schedd| -o root", "", line)
    return re.sub(r"(?<![\w./-])/(opt|usr/local|etc)/", rf"{root}/\1/", line)


def bash(script: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run lines in one bash (set -e); assert exit 0, showing the script and output otherwise."""
    text = "\n".join(["set -eo pipefail", *script])
    result = subprocess.run(
        ["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, (
        f"$ {text}\nexit {result.returncode}\n--- stdout\n{result.stdout}\n"
        f"--- stderr\n{result.stderr}"
    )
    return result.stdout


@pytest.fixture
def python3_dir(tmp_path: Path) -> Path:
    """A directory whose `python3` is this test's base interpreter (not its virtualenv)."""
    found = tmp_path / "python-bin"
    found.mkdir()
    (found / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    return found


@pytest.mark.timeout(300)
def test_the_install_works_offline_from_a_copied_bundle_and_puts_schedctl_on_path(
    tmp_path: Path, python3_dir: Path
) -> None:
    checkout = tmp_path / "checkout"  # the build machine: a checkout and the package registry
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, checkout)
    for name in ("schedd", "config"):
        shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    build_env = os.environ | {"PATH": f"{python3_dir}:{os.environ['PATH']}"}
    bash(block_with("Install", "pip wheel"), checkout, build_env)

    vm, root = tmp_path / "vm-home", tmp_path / "vm-root"  # scp -r schedd-bundle to the VM
    shutil.copytree(checkout / "schedd-bundle", vm / "schedd-bundle")
    for existing in ("usr/local/bin", "etc/systemd/system"):
        (root / existing).mkdir(parents=True)
    vm_env = {
        "PATH": f"{root}/usr/local/bin:{python3_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(vm),
        "LANG": "C.UTF-8",
        "PIP_CONFIG_FILE": os.devnull,  # no find-links, no extra index from this machine
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # nothing answers: no registry
    }
    for block in (block_with("Install", "venv"), block_with("Install", "nft -c")):
        bash([x for line in block if (x := on_the_vm(line, root))], vm, vm_env)

    found = bash(["command -v schedctl schedd", "schedctl --help", "schedd --help"], vm, vm_env)
    assert found.splitlines()[:2] == [
        f"{root}/usr/local/bin/schedctl",
        f"{root}/usr/local/bin/schedd",
    ]
    assert (root / "usr/local/bin/schedctl").resolve().parent == root / "opt/schedd/bin"
    assert "Usage: schedctl" in found and "Usage: schedd" in found
    unit = (root / "etc/systemd/system/schedd@.service").read_text()
    (start,) = re.findall(r"^ExecStart=(\S+)", unit, re.M)
    assert os.access(root / start.lstrip("/"), os.X_OK), f"the unit's {start} is not installed"
    assert tomllib.loads((root / "etc/schedd/node1.toml").read_text())["node"]["id"] == "node1"
    assert f'include "{root}/etc/schedd/schedd.nft"' in (root / "etc/nftables.conf").read_text()


# -- firewall ----------------------------------------------------------------------------------


def test_the_firewall_rules_open_the_configured_ports_to_the_right_hosts() -> None:
    configs = vm_configs()
    api = {host_port(c["api"]["listen"]) for c in configs}
    raft = {host_port(c["raft"]["listen"]) for c in configs}
    (api_port,), (raft_port,) = {p for _, p in api}, {p for _, p in raft}
    nodes = {h for h, _ in raft}
    documented = re.findall(r"^```nft\n(.*?)^```", section("Install"), re.S | re.M)
    assert documented == [NFT_FILE.read_text()], "the page shows config/vm/schedd.nft as it is"
    rules = NFT_FILE.read_text()
    sets = {
        name: {ipaddress.ip_network(e.strip()) for e in elements.split(",")}
        for name, elements in re.findall(r"set (\w+) \{[^}]*elements = \{([^}]*)\}", rules)
    }
    assert {ipaddress.ip_network(h) for h in nodes} == sets["raft_peers"]
    accepted = dict(re.findall(r"tcp dport (\d+) ip saddr @(\w+) accept", rules))
    dropped = re.findall(r"tcp dport (\d+) drop", rules)
    assert accepted.keys() == set(dropped) == {str(api_port), str(raft_port)}
    assert accepted[str(raft_port)] == "raft_peers"
    clients = sets[accepted[str(api_port)]]  # the nodes read each other's clocks there
    assert all(any(ipaddress.ip_address(h) in net for net in clients) for h in nodes)
    ufw = re.findall(
        r"ufw allow proto tcp from (\S+) to any port (\d+)$",
        "\n".join(block_with("Install", "ufw enable")),
        re.M,
    )
    peers = {host_port(p)[0] for p in configs[0]["raft"]["peers"]}  # type: ignore[attr-defined]
    assert {h for h, port in ufw if port == str(raft_port)} == peers  # the first VM's two peers
    (api_from,) = {h for h, port in ufw if port == str(api_port)}
    assert all(ipaddress.ip_address(h) in ipaddress.ip_network(api_from) for h in nodes)
    if shutil.which("nft") and os.geteuid() == 0:
        check = subprocess.run(["nft", "-c", "-f", str(NFT_FILE)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


# -- first start: over TLS, and the tenant's token --------------------------------------------


def test_no_plain_http_url_follows_the_tls_section() -> None:
    after = OPERATIONS.read_text().split("\n## TLS for the API\n", 1)[1]
    commands = [line for block in sh_blocks(after) for line in block]
    plain = [url for line in commands for url in URL.findall(line) if url.startswith("http://")]
    assert plain == [], f"commands after the TLS section use http:// URLs: {plain}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> NodeCert:
    return CertificateAuthority(tmp_path_factory.mktemp("pki")).issue("n1", dns=("localhost",))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory, pki: NodeCert) -> Iterator[NodeProcess]:
    api = f'tls_cert = "{pki.cert}"\ntls_key = "{pki.key}"\n'
    (node,) = make_nodes(tmp_path_factory.mktemp("tls-node"), 1, api_extra=api)
    node.tls = client_context(pki.ca)
    with running([node]):
        yield node


def test_first_start_runs_over_https_and_the_new_tenants_token_then_works(
    tmp_path: Path, tls_node: NodeProcess, pki: NodeCert
) -> None:

    first = block_with("First start", "tenants create")
    then = block_with("First start", "sk_...")
    admin_token = tmp_path / "admin.token"
    admin_token.write_text(ADMIN_TOKEN + "\n")
    here = {
        r"https://10\.0\.0\.11:8701,\S+": tls_node.url,  # one node stands in for three
        "/etc/schedd/ca.crt": str(pki.ca),
        "/etc/schedd/admin.token": str(admin_token),
        r"\$\(sudo cat ": "$(cat ",
        r"^schedctl tenants create (\S+)$": r"schedctl tenants create \1 | tee created.txt",
        r"=sk_\.\.\.$": "=$(awk '$1 == \"token\" {print $2}' created.txt)",
    }
    script = []
    for line in [*first, *then]:
        for pattern, replacement in here.items():
            line = re.sub(pattern, replacement, line)
        script.append(line)
    assert not any("10.0.0." in line or "/etc/" in line for line in script), script
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    out = bash([*script, 'echo "token in use: $SCHEDCTL_TOKEN"'], tmp_path, env | {"LANG": "C"})
    printed = dict(
        line.split(None, 1) for line in (tmp_path / "created.txt").read_text().splitlines()
    )
    assert printed["token"].startswith("sk_") and printed["signing_secret"].startswith("whsec_")
    assert out.splitlines()[-1] == f"token in use: {printed['token']}"
