"""Component packages export their public names lazily, from the imports their TYPE_CHECKING block declares."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from saintpipe.core.lazy import declared_exports

PACKAGES = ["saintpipe.services.pool", "saintpipe.services.feature_shard", "saintpipe.services.dataset",
            "saintpipe.services.sampler", "saintpipe.services.sampler_service", "saintpipe.trainer",
            "saintpipe.minibatch", "saintpipe.loader"]


def test_declared_exports_reads_only_the_type_checking_block():
    source = (
        "import os\nfrom a.b import NotExported\n"
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n    from p.one import A, B as C\n    from p.two import D\n    import p.three\n"
    )
    assert declared_exports(source) == {"A": "p.one", "C": "p.one", "D": "p.two"}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_name_in_all_resolves_from_its_package_and_dir_lists_it(name):
    package = importlib.import_module(name)
    with open(package.__file__, encoding="utf-8") as source:
        where = declared_exports(source.read())
    assert package.__all__, name
    for public in package.__all__:
        assert getattr(package, public) is getattr(importlib.import_module(where[public]), public), public
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_exactly_what_the_type_checking_block_declares(name):
    package = importlib.import_module(name)
    with open(package.__file__, encoding="utf-8") as source:
        assert sorted(declared_exports(source.read())) == sorted(package.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    import saintpipe.services.pool as pool

    with pytest.raises(AttributeError, match="saintpipe.services.pool.*NoSuchThing"):
        pool.NoSuchThing  # noqa: B018


def test_importing_a_package_loads_none_of_its_heavy_dependencies():
    code = ("import sys; import " + ", ".join(PACKAGES[:-1]) +
            "; print(sorted(m for m in ('torch', 'numba', 'ray', 'grpc', 'redis', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
