"""The one reader of the NAME=FILE options (:mod:`runtime.io.named_paths`) at its
boundaries: what is a name and what a path, spaces, a second '=', names in any case,
and the faults each refused with the option and the value as given."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.io.named_paths import INPUT, OUTPUT_VIEW, SERVE_INPUT, TABLE, NamedPath
from runtime.workload import CliError

NAMES = st.text(st.characters(blacklist_characters="=", blacklist_categories=("Cs",)), min_size=1).filter(
    lambda s: s.strip() != ""
)
PATHS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(lambda s: s.strip() != "")


@given(NAMES, PATHS)
def test_the_name_is_before_the_first_equals_sign_and_the_path_all_after_it(name: str, path: str) -> None:
    text = f"{name}={path}"
    assert INPUT.parse([text]) == [NamedPath(name.strip(), path.strip(), text)]


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("B", "no '='"),
        ("", "no '='"),
        ("=b.csv", "no stream before '='"),
        ("  =b.csv", "no stream before '='"),
        ("B=", "no file after '='"),
        ("B=  ", "no file after '='"),
        ("=", "no stream before '='"),
    ],
)
def test_a_bad_form_names_the_option_the_value_and_the_fault(text: str, fault: str) -> None:
    with pytest.raises(CliError) as err:
        INPUT.parse(["H=h.csv", text])
    assert str(err.value) == f"--input {text!r}: {fault}; give STREAM=FILE (for example B=blood.csv)"


def test_several_files_of_a_stream_or_table_but_one_of_a_view_or_a_service_input() -> None:
    assert [p.path for p in INPUT.parse(["B=1.csv", "b=2.csv"])] == ["1.csv", "2.csv"]
    assert [p.name for p in TABLE.parse(["patients=1.csv", "PATIENTS=2.csv"])] == ["patients", "PATIENTS"]
    with pytest.raises(CliError, match=r"^--output-view 'V=b': view V is given twice \(first as 'v=a'\)"):
        OUTPUT_VIEW.parse(["v=a", "w=c", "V=b"])
    with pytest.raises(CliError, match=r"^--input 'B = y': stream B is given twice \(first as ' b=x'\)"):
        SERVE_INPUT.parse([" b=x", "B = y"])
    with pytest.raises(CliError, match=r"^--input 'B=': no directory after '='; give STREAM=DIR"):
        SERVE_INPUT.parse(["B="])


def test_a_name_is_declared_in_any_case_and_an_undeclared_one_is_refused() -> None:
    assert INPUT.declared("b", "b.csv", ["B", "H"]) == "B"
    assert OUTPUT_VIEW.declared("PAIRS", "p.jsonl", ["pairs"]) == "pairs"
    with pytest.raises(CliError) as err:
        INPUT.declared("Bx", "b.csv", ["B", "H"])
    assert str(err.value) == (
        "--input 'Bx=b.csv': the schema declares no stream 'Bx' (did you mean 'B'?) (streams: B, H)"
    )
    with pytest.raises(CliError) as err:
        TABLE.declared("patients", "p.csv", [])
    assert str(err.value) == "--table 'patients=p.csv': the query file declares no table 'patients'"
