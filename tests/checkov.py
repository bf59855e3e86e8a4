#!/usr/bin/env python3
"""Checkov over what slurmops renders, held to a checked-in list of what it may still find.

Usage: checkov.py CHECKOV SKIPS DIR_OR_FILE...

Runs CHECKOV (the pinned version tests/run-all.sh installs) on each DIR_OR_FILE (a directory of
`slurmops render --output-dir`, or the YAML of `slurmops install --print`), and reads each
finding's object back from its file to name the slurmops component it belongs to (the object's
`app.kubernetes.io/component` label: worker, login, controller, accounting, restapi, database;
the install's objects are `slurmops`). A finding passes only when SKIPS (YAML: a list of
`{check, components, why}`) lists its check for its component. Fails on any other finding, and
on a component of an entry of SKIPS that no finding needed (a fixed finding leaves the list). Prints the figures
per input: passed, failed, kept by the list.
"""

import json
import subprocess
import sys
from pathlib import Path

import yaml


def objects(path):
    """(kind, namespace, name) -> labels of every object in PATH (a file or a directory)."""
    files = [path] if path.is_file() else sorted(path.glob("*.yaml"))
    out = {}
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if not isinstance(doc, dict) or "kind" not in doc:
                continue
            meta = doc.get("metadata") or {}
            labels = meta.get("labels") or {}
            out[(doc["kind"], meta.get("namespace", "default"), meta.get("name", ""))] = labels
    return out


def component(resource, objs):
    """The slurmops component of checkov's RESOURCE id (`Kind.namespace.name[.labels]`)."""
    parts = resource.split(".")
    kind, ns, name = parts[0], parts[1], parts[2]
    labels = objs.get((kind, ns, name))
    if labels is None:
        # A check on the pods a workload makes (CKV2_*): the workload of that name.
        labels = next((l for (k, n, m), l in objs.items() if n == ns and m == name), None)
    if labels is None:
        return None
    return labels.get("app.kubernetes.io/component") or labels.get("app.kubernetes.io/name")


def main():
    checkov, skips_file, inputs = sys.argv[1], Path(sys.argv[2]), [Path(a) for a in sys.argv[3:]]
    skips = yaml.safe_load(skips_file.read_text())
    allowed = set()
    for i, s in enumerate(skips):
        assert s.get("why"), f"{skips_file}: entry {i} ({s.get('check')}) says no why"
        for c in s["components"]:
            allowed.add((s["check"], c))
    used = set()
    new = []
    for path in inputs:
        run = subprocess.run(
            [checkov, "--framework", "kubernetes", "--quiet", "--compact", "-o", "json"]
            + (["-f", str(path)] if path.is_file() else ["-d", str(path)]),
            capture_output=True,
            text=True,
        )
        if not run.stdout.strip():
            sys.exit(f"checkov gave no answer on {path}: {run.stderr[-2000:]}")
        reports = json.loads(run.stdout)
        reports = reports if isinstance(reports, list) else [reports]
        objs = objects(path)
        passed = failed = kept = 0
        for r in reports:
            if "results" not in r:
                continue
            passed += r["summary"]["passed"]
            for f in r["results"].get("failed_checks", []):
                failed += 1
                comp = component(f["resource"], objs)
                key = (f["check_id"], comp)
                if key in allowed:
                    used.add(key)
                    kept += 1
                else:
                    new.append(f"{path}: {f['check_id']} ({f['check_name']}) on {f['resource']} [component {comp}]")
        print(f"{path}: {passed} passed, {failed} failed, {kept} of them kept by {skips_file}")
    stale = [f"{check} on {comp}" for check, comp in sorted(allowed - used)]
    if new:
        print("new findings (fix them, or list them in " + str(skips_file) + " with why):\n  " + "\n  ".join(new))
    if stale:
        print(f"entries of {skips_file} no finding needs (remove them):\n  " + "\n  ".join(stale))
    if new or stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
