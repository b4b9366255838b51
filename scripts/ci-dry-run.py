#!/usr/bin/env python3
"""Runs a GitHub Actions workflow's jobs on this machine, for testing the example workflows.

Every `run:` step runs as GitHub runs it (`bash --noprofile --norc -eo pipefail`, with
GITHUB_OUTPUT, GITHUB_PATH, RUNNER_TEMP and the workflow, job and step `env`), its
`${{ ... }}` expressions expanded from the matrix, the inputs, step and job outputs. Jobs run
in `needs` order, one matrix combination after another. What needs GitHub is replaced:
  * actions/upload-artifact and actions/download-artifact copy to and from a local store
    (a directory per artifact name; `pattern` and `merge-multiple` as GitHub does them);
  * actions/checkout does nothing (steps see the repository through absolute paths in --env);
  * the step with `id: install-kpack` is skipped: the kpack given with --kpack-bin is on PATH.
Anything else the workflow uses (another action, `if:`, another shell) is an error, so a
workflow this script passes does not lean on something it skipped.

usage: ci-dry-run.py WORKFLOW --store DIR --work DIR --kpack-bin DIR
                     [--matrix JOB.KEY=V1,V2...] [--env NAME=VALUE...] [--input NAME=VALUE...]
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys

import yaml


def fail(message):
    sys.exit(f"ci-dry-run: {message}")


class Context:
    def __init__(self, inputs):
        self.inputs = inputs
        self.needs = {}  # job -> outputs
        self.matrix = {}
        self.steps = {}  # step id -> outputs
        self.env = {}

    def value(self, expr):
        expr = expr.strip()
        m = re.fullmatch(r"fromJSON\((.*)\)", expr)
        if m:
            return json.loads(self.value(m.group(1)))
        parts = expr.split(".")
        if parts == ["github", "token"]:
            return "dry-run-token"
        roots = {
            "matrix": self.matrix,
            "inputs": self.inputs,
            "steps": self.steps,
            "needs": self.needs,
            "env": self.env,
        }
        if parts[0] not in roots:
            fail(f"unsupported expression ${{{{ {expr} }}}}")
        node = roots[parts[0]]
        path = parts[1:]
        # steps.ID.outputs.NAME and needs.JOB.outputs.NAME
        if parts[0] in ("steps", "needs"):
            if len(path) != 3 or path[1] != "outputs":
                fail(f"unsupported expression ${{{{ {expr} }}}}")
            path = [path[0], path[2]]
        for p in path:
            if not isinstance(node, dict) or p not in node:
                fail(f"${{{{ {expr} }}}}: {p!r} is not defined")
            node = node[p]
        return node

    def expand(self, text):
        if not isinstance(text, str):
            return text
        whole = re.fullmatch(r"\$\{\{(.*?)\}\}", text.strip())
        if whole:
            v = self.value(whole.group(1))
            return v if not isinstance(v, (str, int, float)) else str(v)
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(self.value(m.group(1))), text)


def copy_into(src, dst):
    os.makedirs(dst, exist_ok=True)
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)


def download(args, store, ctx, workspace):
    path = os.path.join(workspace, ctx.expand(args.get("path", ".")))
    if "name" in args:
        name = ctx.expand(args["name"])
        if not os.path.isdir(os.path.join(store, name)):
            fail(f"download-artifact: no artifact {name!r}")
        copy_into(os.path.join(store, name), path)
        return
    pattern = ctx.expand(args["pattern"])
    names = sorted(n for n in os.listdir(store) if fnmatch.fnmatchcase(n, pattern))
    if not names:
        fail(f"download-artifact: no artifact matches {pattern!r}")
    for n in names:
        to = path if args.get("merge-multiple") else os.path.join(path, n)
        copy_into(os.path.join(store, n), to)


def upload(args, store, ctx, workspace):
    name = ctx.expand(args["name"])
    src = os.path.join(workspace, ctx.expand(args["path"]))
    to = os.path.join(store, name)
    if os.path.exists(to):
        fail(f"upload-artifact: {name!r} uploaded twice in one run")
    if not os.path.isdir(src) or not os.listdir(src):
        if args.get("if-no-files-found", "warn") == "error":
            fail(f"upload-artifact: {name!r}: nothing at {src}")
        return
    copy_into(src, to)


def read_outputs(path):
    outputs = {}
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, marker = line.split("<<", 1)
            value = []
            i += 1
            while lines[i] != marker:
                value.append(lines[i])
                i += 1
            outputs[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        i += 1
    return outputs


def run_job(name, job, combo, wf_env, opts, ctx):
    label = name + "".join(f" {k}={v}" for k, v in combo.items())
    workspace = os.path.join(opts.work, re.sub(r"[^A-Za-z0-9_.-]", "_", label))
    temp = os.path.join(workspace, ".runner-temp")
    os.makedirs(temp)
    ctx.matrix, ctx.steps = combo, {}
    paths = [os.path.abspath(opts.kpack_bin)]
    for key in job:
        if key not in ("name", "needs", "runs-on", "timeout-minutes", "strategy", "steps", "outputs", "env"):
            fail(f"job {name}: key {key!r} is not supported by the dry run")
    for i, step in enumerate(job["steps"]):
        shown = step.get("name") or step.get("uses") or f"step {i}"
        print(f"[{label}] {ctx.expand(shown)}", flush=True)
        if "if" in step or step.get("shell", "bash") != "bash":
            fail(f"{label}: {shown}: `if:` and shells other than bash are not supported")
        if step.get("id") == "install-kpack":
            continue
        uses = step.get("uses")
        if uses:
            action = uses.split("@")[0]
            args = step.get("with", {})
            if action == "actions/checkout":
                continue
            elif action == "actions/download-artifact":
                download(args, opts.store, ctx, workspace)
            elif action == "actions/upload-artifact":
                upload(args, opts.store, ctx, workspace)
            else:
                fail(f"{label}: action {uses} is not supported by the dry run")
            continue
        output = os.path.join(temp, f"output-{i}")
        path_file = os.path.join(temp, f"path-{i}")
        open(output, "w").close()
        open(path_file, "w").close()
        env = dict(os.environ)
        for scope in (wf_env, job.get("env", {}), step.get("env", {})):
            env.update({k: str(ctx.expand(v)) for k, v in scope.items()})
        env.update(opts.env)
        env.update(
            GITHUB_OUTPUT=output,
            GITHUB_PATH=path_file,
            RUNNER_TEMP=temp,
            GITHUB_WORKSPACE=workspace,
            CI="true",
            PATH=os.pathsep.join(paths + [env["PATH"]]),
        )
        ctx.env = env
        script = ctx.expand(step["run"])
        r = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env=env,
        )
        if r.returncode != 0:
            fail(f"{label}: {shown}: exit status {r.returncode}")
        if "id" in step:
            ctx.steps[step["id"]] = read_outputs(output)
        with open(path_file) as f:
            paths = [p for p in f.read().splitlines() if p] + paths
    return {k: ctx.expand(v) for k, v in job.get("outputs", {}).items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workflow")
    ap.add_argument("--store", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--kpack-bin", required=True)
    ap.add_argument("--matrix", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--input", action="append", default=[])
    opts = ap.parse_args()
    opts.env = dict(e.split("=", 1) for e in opts.env)
    overrides = {}
    for m in opts.matrix:
        key, values = m.split("=", 1)
        overrides[key] = values.split(",")
    with open(opts.workflow) as f:
        wf = yaml.safe_load(f)
    ctx = Context(dict(i.split("=", 1) for i in opts.input))
    for i, spec in wf.get("on", wf.get(True, {})).get("workflow_dispatch", {}).get("inputs", {}).items():
        if spec.get("required") and i not in ctx.inputs:
            fail(f"input {i!r} is required (--input {i}=VALUE)")
    jobs = wf["jobs"]
    done = []
    while len(done) < len(jobs):
        ready = [
            n for n, j in jobs.items()
            if n not in done and all(d in done for d in ([j["needs"]] if isinstance(j.get("needs"), str) else j.get("needs", [])))
        ]
        if not ready:
            fail("the jobs' needs form a cycle")
        for name in ready:
            job = jobs[name]
            matrix = dict(job.get("strategy", {}).get("matrix", {}) or {})
            ctx.matrix, ctx.steps = {}, {}
            axes = {}
            for key, values in matrix.items():
                override = overrides.get(f"{name}.{key}")
                values = override if override is not None else ctx.expand(values)
                if not isinstance(values, list) or not values:
                    fail(f"job {name}: matrix {key} is not a non-empty list: {values!r}")
                axes[key] = values
            combos = [{}]
            for key, values in axes.items():
                combos = [dict(c, **{key: v}) for c in combos for v in values]
            outputs = {}
            for combo in combos:
                outputs.update(run_job(name, job, combo, wf.get("env", {}), opts, ctx))
            ctx.needs[name] = outputs
            done.append(name)
    print(f"ci-dry-run: {len(done)} jobs passed: {', '.join(done)}")


if __name__ == "__main__":
    main()
