import subprocess
import sys

from _cli_json import json_payload


def test_env_json_is_valid(cli):
    code, out, err = cli("env", "--json")
    assert code == 0, err
    facts = json_payload(out)
    assert facts["backend"] == "cpu"
    assert set(facts["versions"]) >= {"torch", "triton", "torch_npu", "cann"}
    assert facts["ub_bytes"] > 0


def test_env_table(cli):
    code, out, _ = cli("env")
    assert code == 0 and "vector_cores" in out and "ub_bytes" in out


def test_env_says_which_facts_are_the_model_chips_and_which_this_machines(cli, monkeypatch):
    """On cpu the UB facts are the model chip's (predictions), the core counts the interpreter's grid."""
    monkeypatch.setenv("COLUMNS", "200")  # one table row per line
    code, out, err = cli("env")
    assert code == 0, err
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│|").split("│")]
        if len(cells) == 3:
            rows[cells[0]] = cells
    chip = rows["chip_model"][1]
    for fact in ("chip_model", "ub_bytes", "ub_enforced"):
        assert rows[fact][2] == f"model chip {chip} (predictions only)", rows[fact]
    for fact in ("cube_cores", "vector_cores"):
        assert rows[fact][2].startswith("this machine") and "interpreter" in rows[fact][2], rows[fact]
    assert rows["backend"][2] == "this machine" and rows["torch version"][2] == "this machine"


def test_npu_backend_unavailable_exits_5_with_one_line(cli, monkeypatch):
    monkeypatch.delenv("ASCENDOPT_BACKEND", raising=False)
    code, out, err = cli("--backend", "npu", "env")
    assert code == 5
    assert out == ""
    assert err.strip().count("\n") == 0 and err.startswith("error: backend 'npu' is not available")


def test_unknown_option_is_usage_error(cli):
    code, _, err = cli("env", "--no-such-option")
    assert code == 2 and "No such option" in err


def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("ascendopt ")


def test_help_imports_neither_torch_nor_triton():
    code = (
        "import sys; from ascendopt.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('torch', 'triton', 'torch_npu', 'pandas') if m in sys.modules]\n"
        "print('IMPORTED', bad)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "IMPORTED []" in proc.stdout, proc.stdout + proc.stderr
    assert "Exit codes" in proc.stdout


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "ascendopt", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ascendopt ")


def test_shape_option_is_spelled_shapes_everywhere_and_shape_is_accepted(cli, tmp_path):
    """freeze, collect and demo take the shape as --shapes (the spelling the README and the printed commands
    use) and also accept --shape: both reach the same check (an unknown preset: exit 2, named)."""
    from typer.main import get_command

    from ascendopt.cli import app

    commands = get_command(app).commands
    for name in ("freeze", "collect", "demo"):
        option = next(p for p in commands[name].params if "--shapes" in p.opts)
        assert option.opts[0] == "--shapes" and "--shape" in option.opts, name
    for args in (("freeze", "--kernel", "rms_norm", "-w", str(tmp_path / "ws")),
                 ("collect", "--kernel", "rms_norm", "--out-dir", str(tmp_path / "prof")),
                 ("demo", "-w", str(tmp_path / "demo"))):
        for spelling in ("--shapes", "--shape"):
            code, out, err = cli(*args, spelling, "nope")
            assert code == 2 and "no shape preset 'nope'" in err, (args, spelling, err)
    assert not any(tmp_path.iterdir())  # refused before anything was written
