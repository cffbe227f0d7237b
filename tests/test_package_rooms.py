"""The package's rooms keep their shape: sizes, what the poet imports, one device default."""

import ast
import inspect

import export_package
import transformer_book


def imported_modules(module: str) -> set[str]:
    """The package modules that ``module`` imports when it runs (an import under TYPE_CHECKING does not)."""
    tree = ast.parse((export_package.PACKAGE_DIR / f"{module}.py").read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    return {
        node.module.split(".")[1]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith(f"{export_package.PACKAGE}.")
        and id(node) not in typing_only
    }


def import_closure(module: str) -> set[str]:
    """``module`` and every package module it imports, transitively: the files a reader of it opens."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += imported_modules(name)
    return seen


def test_the_poet_reads_no_encoder_decoder():
    # The poet's closure is the GPT's (8 files), the poems and their vocabulary (tasks), the shipped
    # files, decoding with its sampling rule, and the training loop: nothing of chapter 9's
    # encoder-decoder, of the output layer and loss (generator) or of beam search.
    closure = import_closure("poet")
    assert import_closure("gpt") <= closure
    encoder_decoder = {"model", "encoder", "decoder", "translation", "tatoeba", "subwords"}
    assert closure.isdisjoint(encoder_decoder | {"generator", "beam"}), closure
    assert len(closure) <= 14, sorted(closure)


def test_no_module_over_400_lines():
    lengths = {
        path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in export_package.generated_files()
    }
    assert {name: n for name, n in lengths.items() if n > 400} == {}


def test_no_function_over_60_lines():
    long = {
        f"{path.stem}.{node.name}": node.end_lineno - node.lineno + 1
        for path in export_package.generated_files()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 60
    }
    assert long == {}


# None left: every chapter's functions default to "cpu" (a name here would be allowed None).
DEVICE_NONE_YET: set[str] = set()
# A distributed run's setting, not a default place: "auto" picks the accelerator (chapter 17).
RUN_SETTINGS = {"DistributedRun.__init__": "auto"}


def device_defaults() -> dict[str, object]:
    """Every public function and method of the package that takes ``device``, with its default."""
    found = {}
    for name in transformer_book.__all__:
        thing = getattr(transformer_book, name)
        members = [(name, thing)] if inspect.isfunction(thing) else []
        if inspect.isclass(thing) and thing.__module__.startswith("transformer_book"):
            members += [(f"{name}.{m}", f) for m, f in vars(thing).items() if inspect.isfunction(f)]
        for label, function in members:
            parameter = inspect.signature(function).parameters.get("device")
            if parameter is not None and parameter.default is not inspect.Parameter.empty:
                found[label] = parameter.default
    return found


def test_one_device_default():
    defaults = device_defaults()
    assert len(defaults) > 20  # the walk reaches the package's functions and methods
    others = {label: default for label, default in defaults.items() if default != "cpu"}
    for label, default in RUN_SETTINGS.items():
        assert others.pop(label) == default, label
    # only those still to change may differ (once one says "cpu", it drops out of this)
    assert others.keys() <= DEVICE_NONE_YET and set(others.values()) <= {None}, others
