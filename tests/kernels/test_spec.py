"""``kernels.spec``'s NAME=VALUE parser, the one behind --set, --tile, --shapes, --variants and --config."""

import subprocess
import sys

import pytest

from ascendopt.errors import UsageError
from ascendopt.kernels.spec import parse_assignments, parse_dims


def test_one_string_or_several_split_at_commas_blank_parts_skipped():
    assert parse_assignments(["BT=64,BD=128", " X = 1 "]) == {"BT": "64", "BD": "128", "X": "1"}
    assert parse_assignments("BT=64, ,BD=128,") == {"BT": "64", "BD": "128"}
    assert parse_assignments(None) == {} and parse_assignments([]) == {} and parse_assignments(" ") == {}


def test_values_stay_strings_unless_integer():
    assert parse_assignments(["block_rows=16"]) == {"block_rows": "16"}  # the spec validates tunables
    assert parse_assignments("a=1,b=-2", integer=True) == {"a": 1, "b": -2}
    assert parse_assignments("seqlens=3:0:17,H=2", integer=True, lists=("seqlens",)) == {"seqlens": (3, 0, 17), "H": 2}


def test_a_repeated_name_keeps_the_last_value_unless_unique():
    assert parse_assignments(["a=1", "a=2"]) == {"a": "2"}
    with pytest.raises(UsageError, match=r"^--set a given twice: one change per round$"):
        parse_assignments(["a=1", "a=2"], unique=True, unique_why="one change per round")
    with pytest.raises(UsageError, match=r"^--tile BT given twice$"):
        parse_assignments("BT=1,BT=2", option="--tile", integer=True, unique=True)


@pytest.mark.parametrize("text, kwargs, message", [
    ("a", {}, "--set 'a': expected NAME=VALUE (e.g. --set block_rows=16)"),
    ("=3", {}, "--set '=3': expected NAME=VALUE"),  # an empty name is not a name
    ("a-b=3", {}, "--set 'a-b=3': expected NAME=VALUE"),
    ("BT64", {"option": "--tile", "example": "BT=64,BD=256", "value": "size"},
     "--tile 'BT64': expected NAME=SIZE (e.g. BT=64,BD=256)"),
    ("BT=6.5", {"option": "--tile", "integer": True, "value": "size"}, "--tile 'BT=6.5': size must be an integer"),
    ("BT=0", {"option": "--tile", "integer": True, "minimum": 1, "value": "size"}, "--tile BT=0: size must be >= 1"),
    ("BT=", {"integer": True}, "--set 'BT=': value must be an integer"),
    ("seqlens=3:x", {"option": "shape item", "integer": True, "lists": ("seqlens",)},
     "shape item 'seqlens=3:x': value must be an integer"),
])
def test_errors_name_the_option_and_the_part(text, kwargs, message):
    with pytest.raises(UsageError) as exc:
        parse_assignments(text, **kwargs)
    assert str(exc.value).startswith(message)


def test_parse_dims_is_the_integer_form_with_varlen_lists():
    assert parse_dims("B=2, T=64,D=128") == {"B": 2, "T": 64, "D": 128}
    assert parse_dims("seqlens=3:17:40,H=4") == {"seqlens": (3, 17, 40), "H": 4}
    with pytest.raises(UsageError, match=r"shape item 'T': expected NAME=VALUE \(e.g. B=2,T=64,D=128\)"):
        parse_dims("B=2,T")
    with pytest.raises(UsageError, match="shape item 'D=wide': value must be an integer"):
        parse_dims("D=wide")
    with pytest.raises(UsageError, match="shape ' , ': empty"):
        parse_dims(" , ")


def test_the_spec_module_stays_cheap_to_import():
    """The CLI imports it for the parser on every --set: no torch, no triton."""
    code = ("import sys; import ascendopt.kernels.spec; "
            "print([m for m in ('torch', 'triton') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
