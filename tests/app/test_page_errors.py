"""Bad model names and damaged exports get one clear message (CLI exit 2; app error box text)."""

import pytest

from specviz.app.controls import load_export
from specviz.cli import main
from specviz.errors import SpecVizError


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    return err


def test_unknown_hub_id_offline(capsys):
    err = _one_line_error(capsys, ["run", "--target", "nobody/no-such-model-xyz", "--prompt", "hi"])
    assert "cannot be reached" in err or "could not load" in err


@pytest.mark.slow  # the CLI loads the embedded target before it looks for the draft
def test_missing_local_folder_as_draft(capsys, tmp_path):
    err = _one_line_error(capsys, ["run", "--draft", str(tmp_path / "missing-draft"), "--prompt", "hi",
                                   "--max-new-tokens", "4"])
    assert "does not exist" in err


@pytest.mark.slow
def test_bad_layerskip_depth(capsys):
    err = _one_line_error(capsys, ["run", "--draft", "layerskip:99", "--prompt", "hi", "--max-new-tokens", "4"])
    assert "use layerskip:1 … layerskip:29" in err


class Upload:
    def __init__(self, data: bytes):
        self.data = data

    def getvalue(self):
        return self.data


@pytest.mark.parametrize("damaged", [b"{not json", b'{"spec": {"schema": "other/9"}, "baseline": {}}', b"[1, 2]", b""])
def test_damaged_export_is_refused(damaged):
    with pytest.raises(SpecVizError) as info:
        load_export(Upload(damaged))
    assert "export" in str(info.value) or "version" in str(info.value)


@pytest.mark.parametrize("value", ["0", "10", "two", "-1", "1.5"])
def test_a_server_told_a_bad_number_of_pairs_says_so(monkeypatch, value):
    from specviz.app import service

    monkeypatch.setenv(service.PAIRS_ENV, value)
    with pytest.raises(SpecVizError) as info:
        service.app_pairs()
    assert "SPECVIZ_PAIRS must be a whole number from 1 to 9" in str(info.value)


@pytest.mark.parametrize(("value", "pairs"), [("", 3), ("1", 1), (" 2 ", 2), ("9", 9)])
def test_a_server_times_runs_in_the_pairs_it_was_told(monkeypatch, value, pairs):
    from specviz.app import service

    monkeypatch.setenv(service.PAIRS_ENV, value)
    assert service.app_pairs() == pairs


@pytest.mark.parametrize(("value", "extra"), [("", 2), ("0", 0), (" 4 ", 4), ("8", 8)])
def test_a_server_adds_the_busy_pairs_it_was_told(monkeypatch, value, extra):
    from specviz.app import service

    monkeypatch.setenv(service.BUSY_PAIRS_ENV, value)
    assert service.app_busy_pairs() == extra


@pytest.mark.parametrize("value", ["9", "two", "-1"])
def test_a_server_told_a_bad_number_of_busy_pairs_says_so(monkeypatch, value):
    from specviz.app import service

    monkeypatch.setenv(service.BUSY_PAIRS_ENV, value)
    with pytest.raises(SpecVizError, match="SPECVIZ_BUSY_PAIRS must be a whole number from 0 to 8"):
        service.app_busy_pairs()
