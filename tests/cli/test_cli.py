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
