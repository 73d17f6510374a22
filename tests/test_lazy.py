import subprocess
import sys

import pytest

import divscope._lazy


def test_unknown_name_is_an_attribute_error():
    getattr_, _ = divscope._lazy.lazy_exports("pkg", {"sqrt": "math"})
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'cos'"):
        getattr_("cos")


def test_package_import_does_not_load_torch():
    code = "import sys, divscope, divscope.grading, divscope.lab; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
