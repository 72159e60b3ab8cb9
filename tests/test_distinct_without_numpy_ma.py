"""formats.distinct gives np.unique's answers for integer arrays, and the commands that called np.unique (verify's
index and cq checks, the report) no longer import numpy.ma (~40 ms) to get them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rmqinspect.formats.distinct import distinct, has_repeats
from support import SAMPLE_STORE

INTS = hnp.arrays(st.sampled_from([np.int32, np.int64]), st.integers(0, 300),
                  elements=st.integers(-2**31, 2**31 - 1) | st.integers(-3, 3))


@given(INTS)
def test_distinct_and_has_repeats_are_np_unique(a):
    assert distinct(a).tolist() == np.unique(a).tolist()
    assert has_repeats(a) == (np.unique(a).size != a.size)


def test_verify_and_report_never_import_numpy_ma(tmp_path):
    code = ("import sys, json; from click.testing import CliRunner; from rmqinspect.cli.main import cli; "
            f"a = CliRunner().invoke(cli, ['verify', {str(SAMPLE_STORE)!r}, '--format', 'json', '--jobs', '1']); "
            f"b = CliRunner().invoke(cli, ['report', {str(SAMPLE_STORE)!r}, '--out', {str(tmp_path / 'r.html')!r}, "
            "'--jobs', '1']); print(json.dumps([a.exit_code, b.exit_code, 'numpy.ma' in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    codes_a, code_b, imported = json.loads(p.stdout.splitlines()[-1])
    assert codes_a in (0, 1) and code_b == 0 and not imported, p.stderr
