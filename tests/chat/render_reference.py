#!/usr/bin/env python3
"""Renders chat templates the way Hugging Face transformers does, as the tests' reference.

Usage: render_reference.py INPUT.json OUTPUT.json
INPUT: {"now": [Y, m, d, H, M, S], "cases": [{"template": str, "context": {...}}, ...]}
OUTPUT: [{"ok": true, "text": str} | {"ok": false, "error": str}, ...] in the same order.

The environment mirrors transformers' _compile_jinja_template: ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, a `generation` block tag, and
raise_exception / strftime_now globals; tojson is json.dumps with ensure_ascii=False. The clock is
fixed so that strftime_now is reproducible.
"""
import json
import sys
from datetime import datetime

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as exc:  # pragma: no cover - reported to the C++ test
    sys.stderr.write(f"render_reference.py: jinja2 is not importable: {exc}\n")
    sys.exit(3)


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}` renders its body (as transformers does when it is
    not tracking assistant tokens)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: render_reference.py INPUT.json OUTPUT.json\n")
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    env = make_environment(datetime(*request["now"]))
    compiled = {}
    results = []
    for case in request["cases"]:
        source = case["template"]
        try:
            if source not in compiled:
                compiled[source] = env.from_string(source)
            text = compiled[source].render(**case["context"])
            results.append({"ok": True, "text": text})
        except Exception as exc:  # any failure is an expected-error outcome
            results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
