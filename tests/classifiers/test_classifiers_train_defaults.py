"""``make classifiers``'s side-by-side training script: run names, logs, and a failure named with its log."""

from __future__ import annotations

from classifiers.train_defaults import main, run_names


def test_run_names_follow_the_prefix():
    assert run_names(None) == (["encoder_default", "onetoken_default"], "default_report")
    assert run_names("x") == (["x_encoder_default", "x_onetoken_default"], "x_default_report")


def test_a_failed_run_is_reported_with_its_log_and_no_report_is_written(artifacts, capsys):
    # an unknown option makes both runs fail at parse time (seconds): nothing is trained
    assert main(["--run", "bad", "--no_such_option", "1"]) == 1
    err = capsys.readouterr().err
    for run in ("bad_encoder_default", "bad_onetoken_default"):
        assert f"[classifiers] {run} FAILED" in err
        assert "no_such_option" in (artifacts / "classifiers" / f"{run}.log").read_text()
    assert not (artifacts / "classifiers" / "bad_default_report").exists()
