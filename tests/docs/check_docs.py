#!/usr/bin/env python3
"""The docs check (ctest docs_check): README.md and every page under docs/.

1. Every relative link and image resolves to a file or folder of the tree,
   and every #anchor to a heading of the target page (GitHub's slugs).
2. Every ```yaml block says on its fence line what it is:
     ```yaml job        a complete job file: `barge plan` validates it (it
                        connects to nothing); a file with hosts_command: is
                        planned with --hosts-file in its place, so the
                        command never runs. It must also match `barge schema`.
     ```yaml KEY.PATH   a fragment under that key path (```yaml container,
                        ```yaml roles.head, ```yaml hosts.0; ```yaml . for the
                        top level): each of its keys, at every depth, must be
                        a key of barge's key table there, and its values must
                        match `barge schema` there, with "required" relaxed
                        (a fragment need not hold a block's required keys).
   A ```yaml block with nothing after it fails. Values are read as YAML 1.2
   (the schema's reading: `off` is text, not false).
3. The generated lists are what barge prints now: the key list of
   docs/reference/job-file.md (from `barge schema`) and the commands of
   docs/reference/command-line.md (each `barge COMMAND --help`), between
   their NAME:begin and NAME:end comments; --write rewrites them.

Every failure is printed as FILE:LINE: message; the exit code is 1 when
there is one. Needs python3, python3-yaml and python3-jsonschema.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import yaml

try:
    import jsonschema  # python3-jsonschema
except ImportError:
    sys.exit("docs check: needs python3-jsonschema (apt-get install python3-jsonschema): "
             "without it no value would be checked")

KEYS_PAGE = "docs/reference/job-file.md"
FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)\s*(.*?)\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_HREF = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"", re.I)


class Problems:
    def __init__(self, root):
        self.root = root
        self.items = []

    def add(self, path, line, message):
        rel = os.path.relpath(path, self.root)
        self.items.append(f"{rel}:{line}: {message}")


# --- Markdown: blocks, headings, links --------------------------------------


def scan(text):
    """Splits a page into fenced blocks and prose lines.

    Returns (blocks, prose): blocks = [(fence_line, info_words, body_lines)],
    prose = [(line_number, text)] outside fences (1-based line numbers)."""
    blocks, prose = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            marker = m.group(2)
            info = ([m.group(3)] if m.group(3) else []) + m.group(4).split()
            start = i
            body = []
            i += 1
            while i < len(lines):
                close = re.match(r"^\s{0,3}(`{3,}|~{3,})\s*$", lines[i])
                if close and close.group(1)[0] == marker[0] and len(close.group(1)) >= len(marker):
                    break
                body.append(lines[i])
                i += 1
            blocks.append((start + 1, info, body))
            i += 1
            continue
        prose.append((i + 1, lines[i]))
        i += 1
    return blocks, prose


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading)  # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = text.replace("`", "").strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN" or cat == "Mn":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def anchors_of(text):
    _, prose = scan(text)
    seen = {}
    result = set()
    for _, line in prose:
        m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
        result.add(m.group(1))
    return result


def strip_code_spans(line):
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", line)


def check_links(page, text, root, problems, anchor_cache):
    _, prose = scan(text)
    for number, line in prose:
        plain = strip_code_spans(line)
        targets = [m.group(1) for m in LINK.finditer(plain)]
        targets += [m.group(1) for m in HTML_HREF.finditer(plain)]
        m = REF_DEF.match(plain)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # http:, https:, mailto:
            path_part, _, anchor = target.partition("#")
            if path_part:
                resolved = (page.parent / path_part).resolve()
                try:
                    resolved.relative_to(root)
                except ValueError:
                    problems.add(page, number, f"link {target} leaves the repository")
                    continue
                if not resolved.exists():
                    problems.add(page, number, f"link {target}: {os.path.relpath(resolved, root)} does not exist")
                    continue
            else:
                resolved = page
            if anchor:
                if resolved.is_dir() or resolved.suffix.lower() != ".md":
                    problems.add(page, number, f"link {target}: an anchor into a file that is not a Markdown page")
                    continue
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors_of(resolved.read_text(encoding="utf-8"))
                if anchor not in anchor_cache[resolved]:
                    problems.add(page, number,
                                 f"link {target}: no heading with anchor #{anchor} in {os.path.relpath(resolved, root)}")


# --- Values, as barge and `barge schema` read them ---------------------------


class CoreLoader(yaml.SafeLoader):
    """PyYAML with YAML 1.2's core schema, as the schema's types assume (an
    editor's language server reads it so): `on`, `off`, `yes`, `no` are
    text, not booleans; only true/false are booleans, ~/null/empty are null."""


CoreLoader.yaml_implicit_resolvers = {}
for _tag, _regexp, _first in [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", list("~nN") + [""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     list("-+.0123456789")),
]:
    CoreLoader.add_implicit_resolver(_tag, re.compile(_regexp), _first)


def _core_int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text)


CoreLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


def relaxed(node):
    """A copy of schema `node` with every "required" dropped: a fragment
    need not hold its block's required keys."""
    if isinstance(node, dict):
        return {k: relaxed(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [relaxed(v) for v in node]
    return node


def line_of(node, path):
    """The 0-based line, in composed YAML `node`, of the value at `path`
    (mapping keys and list indexes, as jsonschema's error.path); of its key
    where it is a mapping's value."""
    line = node.start_mark.line
    for step in path:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == str(step):
                    line, node = key_node.start_mark.line, value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line
        else:
            return line
    return line


def check_values(page, first_line, composed, data, schema_node, where, problems):
    """Validates `data` (a document's values) against `schema_node`; each
    error names the line of the value it is about. Returns the number of
    problems added."""
    validator = jsonschema.Draft202012Validator(schema_node)
    added = 0
    for error in sorted(validator.iter_errors(yaml_to_json(data)), key=lambda e: [str(p) for p in e.path]):
        # Under anyOf (a scalar or a block), the alternative's error that
        # got deepest names the value: "hosts.0.port", not "hosts.0".
        while error.context:
            deeper = max(error.context, key=lambda e: len(e.absolute_path))
            if len(deeper.absolute_path) <= len(error.absolute_path):
                break
            error = deeper
        path = list(error.absolute_path)
        key = ".".join([where] * bool(where) + [str(p) for p in path]) or "the top level"
        problems.add(page, first_line + line_of(composed, path), f"{key}: {error.message} (barge schema)")
        added += 1
    return added


# --- The key table, from `barge schema` -------------------------------------


def alternatives(node):
    """The node and its anyOf/oneOf alternatives, flattened."""
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, dict):
            continue
        out.append(n)
        for key in ("anyOf", "oneOf"):
            stack.extend(n.get(key, []))
    return out


def takes_mapping(node):
    t = node.get("type")
    types = t if isinstance(t, list) else [t]
    return "object" in types or "properties" in node or "additionalProperties" in node


def takes_list(node):
    t = node.get("type")
    types = t if isinstance(t, list) else [t]
    return "array" in types or "items" in node


def child_of(nodes, key):
    """Schemas for the mapping key `key` under any of `nodes`; None when the
    key is not allowed there; [] when allowed with no schema to go on."""
    found, allowed = [], False
    for n in nodes:
        for alt in alternatives(n):
            if not takes_mapping(alt):
                continue
            props = alt.get("properties", {})
            if key in props:
                found.append(props[key])
                allowed = True
                continue
            extra = alt.get("additionalProperties", True)
            if extra is False:
                continue
            allowed = True
            if isinstance(extra, dict):
                found.append(extra)
    return found if allowed else None


def items_of(nodes):
    found = []
    for n in nodes:
        for alt in alternatives(n):
            if takes_list(alt) and isinstance(alt.get("items"), dict):
                found.append(alt["items"])
    return found


def known_keys(nodes):
    keys = set()
    for n in nodes:
        for alt in alternatives(n):
            keys.update(alt.get("properties", {}).keys())
    return sorted(keys)


def resolve_path(schema, path):
    """The schema nodes at a fence's key path, or an error message."""
    nodes = [schema]
    if path == ".":
        return nodes, None
    walked = []
    for segment in path.split("."):
        if segment.isdigit() or segment == "[]":
            nodes = items_of(nodes)
            if not nodes:
                return None, f"{'.'.join(walked) or 'the top level'} is not a list"
        else:
            nxt = child_of(nodes, segment)
            if nxt is None:
                return None, (f"{'.'.join(walked + [segment])}: no such key"
                              f" (keys there: {', '.join(known_keys(nodes))})")
            nodes = nxt
        walked.append(segment)
    return nodes, None


def check_keys(node, nodes, where, page, first_line, problems):
    """Walks a composed YAML node against the schema nodes it sits under."""
    if not nodes:
        return  # free-form below here (a string map's values, ...)
    if isinstance(node, yaml.MappingNode):
        if not any(takes_mapping(a) for n in nodes for a in alternatives(n)):
            problems.add(page, first_line + node.start_mark.line,
                         f"{where or 'the top level'}: takes no keys, but a mapping is given here")
            return
        for key_node, value_node in node.value:
            key = str(key_node.value)
            path = f"{where}.{key}" if where else key
            child = child_of(nodes, key)
            if child is None:
                problems.add(page, first_line + key_node.start_mark.line,
                             f"{path}: unknown key (keys of {where or 'the top level'}: {', '.join(known_keys(nodes))})")
                continue
            check_keys(value_node, child, path, page, first_line, problems)
    elif isinstance(node, yaml.SequenceNode):
        inner = items_of(nodes)
        for item in node.value:
            check_keys(item, inner, f"{where}[]", page, first_line, problems)


def check_fragment(page, fence_line, path, body, schema, problems):
    """Keys first (each unknown key named with the keys allowed there); then,
    where the keys are right, the values against the schema at `path`,
    with "required" relaxed: a fragment is a part of a job file."""
    nodes, error = resolve_path(schema, path)
    if error:
        problems.add(page, fence_line, f"```yaml {path}: {error}")
        return
    text = "\n".join(body)
    try:
        documents = list(yaml.compose_all(text, Loader=CoreLoader))
        values = list(yaml.load_all(text, Loader=CoreLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problems.add(page, fence_line + 1 + (mark.line if mark else 0), f"not valid YAML: {e}")
        return
    where = "" if path == "." else path
    for doc, data in zip(documents, values):
        if doc is None:
            continue
        before = len(problems.items)
        check_keys(doc, nodes, where, page, fence_line + 1, problems)
        if len(problems.items) == before and nodes:
            node = nodes[0] if len(nodes) == 1 else {"anyOf": nodes}
            check_values(page, fence_line + 1, doc, data, relaxed(node), where, problems)


# --- Complete job files ------------------------------------------------------


def yaml_to_json(value):
    """PyYAML's values as JSON would carry them (dates and the like as text)."""
    if isinstance(value, dict):
        return {str(k): yaml_to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [yaml_to_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def check_job(page, fence_line, body, schema, barge, problems, scratch):
    text = "\n".join(body) + "\n"
    try:
        composed = yaml.compose(text, Loader=CoreLoader)
        data = yaml.load(text, Loader=CoreLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problems.add(page, fence_line + 1 + (mark.line if mark else 0), f"not valid YAML: {e}")
        return
    if not isinstance(data, dict):
        problems.add(page, fence_line, "```yaml job: a job file is a mapping")
        return
    check_values(page, fence_line + 1, composed, data, schema, "", problems)
    work = Path(tempfile.mkdtemp(prefix="job-", dir=scratch))
    (work / "job.yaml").write_text(text, encoding="utf-8")
    args = [barge, "plan", "job.yaml"]
    if "hosts_command" in data:
        # --hosts-file drops hosts_command before it is read: it never runs.
        (work / "hosts.yaml").write_text("- 192.0.2.10\n", encoding="utf-8")
        args += ["--hosts-file", "hosts.yaml"]
    env = dict(os.environ)
    env.update({
        "BARGE_HOME": str(work / "home"),
        "XDG_STATE_HOME": str(work / "state"),
        "XDG_CONFIG_HOME": str(work / "config"),
        "NO_COLOR": "1",
    })
    try:
        run = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        problems.add(page, fence_line, "```yaml job: barge plan did not finish in 60 s")
        return
    if run.returncode != 0:
        reported = False
        for line in (run.stderr + run.stdout).splitlines():
            m = re.match(r"^job\.yaml:(\d+):(?:\d+:)?\s*(.*)$", line)
            if m:
                problems.add(page, fence_line + int(m.group(1)), f"barge plan: {m.group(2)}")
                reported = True
        if not reported:
            tail = " | ".join((run.stderr or run.stdout).strip().splitlines()[-5:])
            how = f"was killed by signal {-run.returncode}" if run.returncode < 0 else f"exited {run.returncode}"
            problems.add(page, fence_line, f"```yaml job: barge plan {how}: {tail}")


# --- The generated key list --------------------------------------------------


def type_text(node):
    parts = []
    for alt in (node.get("anyOf") or node.get("oneOf") or [node]):
        if "enum" in alt:
            values = alt["enum"]
            if set(map(str, values)) <= {"True", "False", "true", "false"}:
                parts.append("true or false")
            else:
                parts.append(" or ".join(f"`{v}`" for v in values))
            continue
        t = alt.get("type")
        types = t if isinstance(t, list) else [t]
        if "object" in types or "properties" in alt:
            extra = alt.get("additionalProperties")
            if alt.get("properties"):
                parts.append("mapping")
            elif isinstance(extra, dict):
                parts.append("mapping of NAME to " + (type_text(extra) or "anything"))
            else:
                parts.append("mapping")
        elif "array" in types:
            item_alts = alternatives(alt.get("items", {}))
            mappings = any(a.get("properties") for a in item_alts)
            scalars = any(not a.get("properties") and not a.get("anyOf") for a in item_alts)
            parts.append("list of text or mappings" if mappings and scalars
                         else "list of mappings" if mappings else "list")
        elif types == ["null"]:
            continue
        elif "integer" in types and ("pattern" in alt or "string" not in types):
            parts.append("integer")
        else:
            parts.append("text")
    seen = []
    for p in parts:
        if p not in seen:
            seen.append(p)
    return " or ".join(seen)


def key_rows(schema):
    rows, first_seen = [], {}

    def visit(node, path):
        for alt in alternatives(node):
            props = alt.get("properties")
            if props:
                for key, sub in props.items():
                    child = f"{path}.{key}" if path else key
                    add(sub, child)
            extra = alt.get("additionalProperties")
            if isinstance(extra, dict) and (extra.get("properties") or any(
                    a.get("properties") for a in alternatives(extra))):
                visit(extra, f"{path}.NAME")
            item = alt.get("items")
            if isinstance(item, dict) and any(a.get("properties") for a in alternatives(item)):
                visit(item, f"{path}[]")

    def add(sub, path):
        description = sub.get("description", "")
        default = sub.get("default")
        nested = any(a.get("properties") or a.get("items", {}).get("properties") or any(
            b.get("properties") for b in alternatives(a.get("items", {})))
            or (isinstance(a.get("additionalProperties"), dict) and a["additionalProperties"].get("properties"))
            for a in alternatives(sub))
        same = None
        if nested:
            fingerprint = json.dumps({k: v for k, v in sub.items() if k != "description"}, sort_keys=True)
            same = first_seen.get(fingerprint)
            if same is None:
                first_seen[fingerprint] = path
        text = description.replace("|", "\\|")
        if same:
            text += f" (the same keys as `{same}`)"
        rows.append((path, type_text(sub), "" if default is None else f"`{json.dumps(default) if not isinstance(default, str) else default}`", text))
        if nested and not same:
            visit(sub, path)

    visit(schema, "")
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for path, kind, default, text in rows:
        lines.append(f"| `{path}` | {kind} | {default} | {text} |")
    return "\n".join(lines)


def command_sections(barge):
    """Every subcommand's --help, as `barge --help` lists them."""

    def helptext(args):
        got = subprocess.run([barge] + args, capture_output=True, text=True, timeout=60)
        text = got.stdout.replace(barge, "barge").rstrip()
        return "\n".join(line.rstrip() for line in text.splitlines())

    top = helptext(["--help"])
    names, listing = [], False
    for line in top.splitlines():
        if line.startswith("Subcommands:"):
            listing = True
            continue
        m = re.match(r"^  (\S+)\s", line)
        if listing and m:
            names.append(m.group(1))
    out = ["### `barge`", "", "```", top, "```"]
    for name in names:
        out += ["", f"### `barge {name}`", "", "```", helptext([name, "--help"]), "```"]
    return "\n".join(out)


GENERATED = [
    # (page, name, what generates it)
    (KEYS_PAGE, "keys", lambda schema, barge: key_rows(schema)),
    ("docs/reference/command-line.md", "commands", lambda schema, barge: command_sections(barge)),
]


def check_generated(root, schema, barge, write, problems):
    for rel, name, generate in GENERATED:
        page = root / rel
        if not page.exists():
            problems.add(root / rel, 1, "missing: it holds a list generated by tests/docs/check_docs.py")
            continue
        begin_mark = f"<!-- {name}:begin: generated by tests/docs/check_docs.py --write; do not edit -->"
        end_mark = f"<!-- {name}:end -->"
        text = page.read_text(encoding="utf-8")
        begin, end = text.find(begin_mark), text.find(end_mark)
        if begin < 0 or end < begin:
            problems.add(page, 1, f"the generated {name} list's markers are missing ({begin_mark} ... {end_mark})")
            continue
        wanted = begin_mark + "\n\n" + generate(schema, barge) + "\n\n" + end_mark
        if text[begin:end + len(end_mark)] == wanted:
            continue
        if write:
            page.write_text(text[:begin] + wanted + text[end + len(end_mark):], encoding="utf-8")
            print(f"{rel}: the {name} list rewritten")
            continue
        problems.add(page, text[:begin].count("\n") + 1,
                     f"the {name} list differs from what barge prints now (rewrite it: "
                     "python3 tests/docs/check_docs.py --root . --barge BARGE --write)")


# --- Main --------------------------------------------------------------------


def pages(root):
    found = [root / "README.md"]
    docs = root / "docs"
    if docs.is_dir():
        found += sorted(p for p in docs.rglob("*.md"))
    return [p for p in found if p.exists()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the source tree")
    parser.add_argument("--barge", required=True, help="the barge binary")
    parser.add_argument("--write", action="store_true", help="rewrite the generated key list")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    barge = str(Path(args.barge).resolve())
    problems = Problems(root)

    got = subprocess.run([barge, "schema"], capture_output=True, text=True, timeout=60)
    if got.returncode != 0:
        print(f"docs check: `{barge} schema` exited {got.returncode}: {got.stderr.strip()}", file=sys.stderr)
        return 1
    schema = json.loads(got.stdout)

    anchor_cache = {}
    counts = {"pages": 0, "jobs": 0, "fragments": 0}
    with tempfile.TemporaryDirectory(prefix="barge-docs-check-") as scratch:
        for page in pages(root):
            counts["pages"] += 1
            text = page.read_text(encoding="utf-8")
            check_links(page, text, root, problems, anchor_cache)
            blocks, _ = scan(text)
            for fence_line, info, body in blocks:
                if not info or info[0].lower() not in ("yaml", "yml"):
                    continue
                if len(info) < 2:
                    problems.add(page, fence_line, "a ```yaml block must say what it is: ```yaml job "
                                                   "(a complete job file) or ```yaml KEY.PATH (a fragment; . = top level)")
                    continue
                if info[1] == "job":
                    counts["jobs"] += 1
                    check_job(page, fence_line, body, schema, barge, problems, scratch)
                else:
                    counts["fragments"] += 1
                    check_fragment(page, fence_line, info[1], body, schema, problems)
    check_generated(root, schema, barge, args.write, problems)

    for item in problems.items:
        print(item)
    summary = (f"docs check: {counts['pages']} pages, {counts['jobs']} job files planned, "
               f"{counts['fragments']} fragments' keys and values checked: ")
    if problems.items:
        print(summary + f"{len(problems.items)} problem(s)")
        return 1
    print(summary + "all good")
    return 0


if __name__ == "__main__":
    sys.exit(main())
