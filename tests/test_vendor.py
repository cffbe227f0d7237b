"""The vendored JavaScript matches what the installed Altair emits (tools/vendor_js.py)."""

import json

import altair
import yaml

import vendor_js

VENDOR = vendor_js.VENDOR


def test_offline_script_records_the_versions_altair_emits():
    assert (vendor_js.STATIC / "vega-offline.js").read_text() == vendor_js.offline_script(vendor_js.altair_versions())


def test_vendored_versions_satisfy_altair():
    versions = json.loads((VENDOR / "versions.json").read_text())
    assert versions["vega-lite"] == altair.VEGALITE_VERSION.lstrip("v")
    assert versions["vega"].split(".")[0] == altair.VEGA_VERSION.lstrip("v").split(".")[0]
    assert versions["vega-embed"].split(".")[0] == altair.VEGAEMBED_VERSION.lstrip("v").split(".")[0]


def test_vendored_files_carry_their_versions():
    versions = json.loads((VENDOR / "versions.json").read_text())
    for package in ("vega", "vega-lite", "vega-embed"):
        assert f'"{versions[package]}"' in (VENDOR / f"{package}.min.js").read_text(encoding="utf-8"), package
    assert (VENDOR / "mathjax" / "tex-svg.js").stat().st_size > 1_000_000


def test_config_loads_the_vendored_files_in_dependency_order():
    config = yaml.safe_load((vendor_js.REPO_ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["html_js_files"] == [
        "vendor/vega.min.js",
        "vendor/vega-lite.min.js",
        "vendor/vega-embed.min.js",
        "vega-offline.js",
        "book-charts.js",  # the book's chart defaults, which need vega-embed
    ]
    assert config["mathjax_path"] == "vendor/mathjax/tex-svg.js"
    for path in config["html_js_files"] + [config["mathjax_path"]]:
        assert (vendor_js.STATIC / path).exists(), path
