"""deploy/Containerfile fits the Kubernetes manifests that run its image, checked from its
text: no container builder runs here (the reference machine has a docker client and no
daemon, no podman, buildah or kaniko), so the image is not built in a test.

What the manifests ask of the image: a non-root numeric user and group (their
``runAsNonRoot``, ``runAsUser``, ``runAsGroup``), nothing written outside ``/tmp`` (their
``readOnlyRootFilesystem`` and the one writable volume), the ``laneway`` command with the
metrics extra (``--metrics-port``), and the ports they probe and scrape."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
import yaml
from checkout import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONTAINERFILE = ROOT / "deploy" / "Containerfile"
WORKLOADS = ("deployment.yaml", "statefulset.yaml")


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order: continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        continued = line.rstrip().endswith("\\")
        pending += line.rstrip().rstrip("\\").strip() + " "
        if not continued:
            if pending.strip():
                word, _, rest = pending.strip().partition(" ")
                found.append((word.upper(), rest.strip()))
            pending = ""
    return found


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each stage (``FROM`` starts one)."""
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions(text):
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def container(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod spec and the laneway container of a workload manifest (as written)."""
    text = (ROOT / "deploy" / "kubernetes" / name).read_text()
    spec = yaml.safe_load(text)["spec"]["template"]["spec"]
    [worker] = spec["containers"]
    return spec, worker


@pytest.fixture(scope="module")
def final() -> list[tuple[str, str]]:
    return stages(CONTAINERFILE.read_text())[-1]


def values(stage: list[tuple[str, str]], word: str) -> list[str]:
    return [rest for instruction, rest in stage if instruction == word]


def environment(stage: list[tuple[str, str]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for rest in values(stage, "ENV"):
        for name, value in re.findall(r"([A-Z_]+)=(\S+)", rest):
            found[name] = value
    return found


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_image_runs_as_the_non_root_user_and_group_the_manifests_ask_for(
    final: list[tuple[str, str]], name: str
) -> None:
    spec, _ = container(name)
    [user] = values(final, "USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and gid.isdigit(), "numeric, so runAsNonRoot can check it"
    assert int(uid) != 0 and int(gid) != 0
    context = spec["securityContext"]
    assert context["runAsNonRoot"] is True
    assert (int(uid), int(gid)) == (context["runAsUser"], context["runAsGroup"])
    after = [word for word, _ in final[final.index(("USER", user)) :]]
    assert "RUN" not in after, "nothing runs after the user is set: no root step left late"


@pytest.mark.parametrize("name", WORKLOADS)
def test_nothing_is_written_outside_the_one_writable_volume(
    final: list[tuple[str, str]], name: str
) -> None:
    _, worker = container(name)
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    writable = [m["mountPath"] for m in worker["volumeMounts"] if not m.get("readOnly")]
    assert writable == ["/tmp"]
    env = environment(final)
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # no __pycache__ beside the code
    assert env["HOME"] == env["TMPDIR"] == "/tmp"
    build = stages(CONTAINERFILE.read_text())[0]
    assert any("compileall" in rest for rest in values(build, "RUN")), "byte code built in"


@pytest.mark.parametrize("name", WORKLOADS)
def test_the_command_ports_and_extra_are_the_ones_the_manifests_use(
    final: list[tuple[str, str]], name: str
) -> None:
    _, worker = container(name)
    assert worker["command"] == ["laneway"]
    assert "/opt/laneway/bin" in environment(final)["PATH"].split(":")
    [exposed] = values(final, "EXPOSE")
    assert sorted(int(port) for port in exposed.split()) == sorted(
        port["containerPort"] for port in worker["ports"]
    )
    [install] = [rest for rest in values(stages(CONTAINERFILE.read_text())[0], "RUN")
                 if "pip install" in rest and "/opt/laneway/bin/pip" in rest and "." in rest
                 and "[metrics]" in rest]  # fmt: skip
    assert "--metrics-port=9108" in worker["args"] and install
    assert values(final, "WORKDIR") == ["/app"], "laneway run imports MODULE:ATTR from here"


def test_the_build_copies_what_installing_the_checkout_needs() -> None:
    build = stages(CONTAINERFILE.read_text())[0]
    copied = " ".join(values(build, "COPY")).split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {"pyproject.toml", "setup.py", project["readme"], *project["license-files"]}
    assert needed <= set(copied) and "laneway" in copied
    for path in needed:
        assert (ROOT / path).is_file(), path
    [default_app] = [rest for rest in values(build, "ARG") if rest.startswith("APP=")]
    assert (ROOT / default_app.split("=", 1)[1]).is_dir()


def test_the_base_image_is_a_supported_python_and_the_context_leaves_out_local_state() -> None:
    [version] = [
        rest.split("=", 1)[1]
        for word, rest in instructions(CONTAINERFILE.read_text())
        if word == "ARG" and rest.startswith("PYTHON_VERSION=")
    ]
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    assert f"Programming Language :: Python :: {version}" in classifiers
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".kafka", ".postgres", ".jaeger", ".nox", ".git", "dist"} <= ignored
    for stage in stages(CONTAINERFILE.read_text()):
        [image] = [rest for word, rest in stage if word == "FROM"]
        assert image.startswith("docker.io/library/python:${PYTHON_VERSION}-slim"), image


def test_the_instruction_reader_joins_continued_lines_and_skips_comments() -> None:
    text = "# a comment\nFROM x AS b\nRUN a \\\n    && b\nENV A=1 \\\n    B=2\nUSER 1:1\n"
    assert instructions(text) == [
        ("FROM", "x AS b"),
        ("RUN", "a && b"),
        ("ENV", "A=1 B=2"),
        ("USER", "1:1"),
    ]
