"""The one raw -> canonical column table for every profiler format ascendopt reads, plus the
settings keyed by those names: the aic_metrics groups (``METRIC_GROUP_TABLE``: canonical names,
the aliases ``collect`` accepts, signature columns) and the on-screen metric labels (``METRIC_LABELS``).

Nothing outside ``ascendopt.analyze.traces`` sees a raw profiler header. Canonical names are lower case
and carry their unit as a suffix (``_us``, ``_gbs`` = GB/s with GB = 2**30 bytes, ``_kb``,
``_pct`` = percent 0..100, ``_ratio`` = fraction 0..1 of the core's cycles).

Ascend PMU columns come in two halves: ``aic_*`` (cube core, AIC) and ``aiv_*`` (vector core,
AIV). Names that exist on one side only keep a short name (``mac_ratio`` is cube-only,
``vec_ratio`` and ``mte3_ratio`` vector-only, ``mte1_ratio``/``fixpipe_ratio`` cube-only);
names that exist on both sides get a ``cube_`` / ``vector_`` prefix (``cube_scalar_ratio``,
``vector_mte2_ratio``). ``CUBE_SIDE`` / ``VECTOR_SIDE`` list which canonical metric belongs to
which half, so a reader can blank the half a kernel did not run on (a 0 there means "not
applicable", docs/profiler-formats.md §4.4).

Sources of the raw names: docs/profiler-formats.md §4.1-§4.2 (kernel_details,
op_summary, op_statistic headers), §5 (PMU columns per aic_metrics group on Atlas A2) and the
``msprof op`` per-block CSV of fixture ``msprof_op_memory_ub``. Nsight Compute names: the real
``ncu --csv --page raw`` files in tests/data/cuda/ (H200, 2026-12-01).
"""

from __future__ import annotations

import re
from typing import NamedTuple

# -- Ascend: kernel_details.csv / op_summary_*.csv / op_statistic.csv / msprof op CSVs ----------
ASCEND_COLUMNS: dict[str, str] = {
    # identity and timing (kernel_details name | msprof op_summary name before torch_npu's rename)
    "Name": "name",
    "Op Name": "name",
    "Type": "op_type",
    "OP Type": "op_type",
    # the core column: read once; the reader keeps its raw value as ``task_type`` (AI_CORE, AI_CPU, ...)
    # and its canonical class as ``core_type`` (cube, vector, mix_aic, ...; CORE_TYPES below)
    "Accelerator Core": "core_type",
    "Task Type": "core_type",
    "Core Type": "core_type",  # op_statistic.csv
    "Start Time(us)": "start_us",
    "Task Start Time(us)": "start_us",
    "Duration(us)": "duration_us",
    "Task Duration(us)": "duration_us",
    "Wait Time(us)": "wait_us",
    "Task Wait Time(us)": "wait_us",
    "Block Dim": "block_dim",
    "Block Num": "block_dim",  # torch_npu >= 26.x and msprof renamed "Block Dim"
    "Mix Block Dim": "mix_block_dim",
    "Mix Block Num": "mix_block_dim",
    "Step Id": "step",
    "Device_id": "device",
    "Model ID": "model_id",
    "Task ID": "task_id",
    "Stream ID": "stream_id",
    "OP State": "op_state",
    "HF32 Eligible": "hf32_eligible",
    "Context ID": "context_id",
    "Input Shapes": "input_shapes",
    "Input Data Types": "input_dtypes",
    "Input Formats": "input_formats",
    "Output Shapes": "output_shapes",
    "Output Data Types": "output_dtypes",
    "Output Formats": "output_formats",
    "Model Name": "model_name",
    "Infer ID": "infer_id",
    # op_statistic.csv
    "Count": "count",
    "Total Time(us)": "total_us",
    "Min Time(us)": "min_us",
    "Avg Time(us)": "avg_us",
    "Max Time(us)": "max_us",
    "Ratio(%)": "ratio_pct",
    # msprof op per-block CSVs
    "block_id": "block_id",
    "sub_block_id": "sub_block",
    "aic_time(us)": "cube_time_us",
    "aiv_time(us)": "vector_time_us",
    # core time and cycles (every Level1/2 group)
    "aicore_time(us)": "cube_time_us",
    "aic_total_cycles": "cube_cycles",
    "aiv_total_cycles": "vector_cycles",
    # PipeUtilization
    "aic_mac_time(us)": "mac_time_us",
    "aic_mac_ratio": "mac_ratio",
    "aic_scalar_time(us)": "cube_scalar_time_us",
    "aic_scalar_ratio": "cube_scalar_ratio",
    "aic_mte1_time(us)": "mte1_time_us",
    "aic_mte1_ratio": "mte1_ratio",
    "aic_mte2_time(us)": "cube_mte2_time_us",
    "aic_mte2_ratio": "cube_mte2_ratio",
    "aic_fixpipe_time(us)": "fixpipe_time_us",
    "aic_fixpipe_ratio": "fixpipe_ratio",
    "aic_icache_miss_rate": "cube_icache_miss_rate",
    "aiv_vec_time(us)": "vec_time_us",
    "aiv_vec_ratio": "vec_ratio",
    "aiv_scalar_time(us)": "vector_scalar_time_us",
    "aiv_scalar_ratio": "vector_scalar_ratio",
    "aiv_mte2_time(us)": "vector_mte2_time_us",
    "aiv_mte2_ratio": "vector_mte2_ratio",
    "aiv_mte3_time(us)": "mte3_time_us",
    "aiv_mte3_ratio": "mte3_ratio",
    "aiv_icache_miss_rate": "vector_icache_miss_rate",
    "cube_utilization(%)": "cube_utilization_pct",
    # PipeUtilization, msprof op of CANN 8.5 / 9.x and the 950 generation (npu-compute docs): the cube pipe is
    # "cube" not "mac", the cube core has its own MTE3, and *_active_bw = bandwidth while that pipe is busy
    "aic_cube_time(us)": "mac_time_us",
    "aic_cube_ratio": "mac_ratio",
    "aic_mte3_time(us)": "cube_mte3_time_us",
    "aic_mte3_ratio": "cube_mte3_ratio",
    "aic_mte1_active_bw(GB/s)": "mte1_active_bw_gbs",
    "aic_mte2_active_bw(GB/s)": "cube_mte2_active_bw_gbs",
    "aic_mte3_active_bw(GB/s)": "cube_mte3_active_bw_gbs",
    "aic_fixpipe_active_bw(GB/s)": "fixpipe_active_bw_gbs",
    "aiv_mte2_active_bw(GB/s)": "vector_mte2_active_bw_gbs",
    "aiv_mte3_active_bw(GB/s)": "mte3_active_bw_gbs",
    # ArithmeticUtilization (current and CANN 7.0-era sets)
    "aic_mac_fp16_ratio": "mac_fp16_ratio",
    "aic_mac_int8_ratio": "mac_int8_ratio",
    "aic_cube_fops": "cube_fops",
    "aic_vector_fops": "cube_vector_fops",
    "aiv_vec_fp32_ratio": "vec_fp32_ratio",
    "aiv_vec_fp16_ratio": "vec_fp16_ratio",
    "aiv_vec_int32_ratio": "vec_int32_ratio",
    "aiv_vec_misc_ratio": "vec_misc_ratio",
    "aiv_cube_fops": "vector_cube_fops",
    "aiv_vector_fops": "vector_fops",
    # ArithmeticUtilization, msprof op (CANN 8.5 names, then the 950's fp/int split and VF/SFU/SIMT pipes)
    "aic_cube_fp16_ratio": "mac_fp16_ratio",
    "aic_cube_int8_ratio": "mac_int8_ratio",
    "aic_cube_fp_ratio": "cube_fp_ratio",
    "aic_cube_int_ratio": "cube_int_ratio",
    "aic_cube_total_instr_number": "cube_instr_count",
    "aic_cube_fp_instr_number": "cube_fp_instr_count",
    "aic_cube_int_instr_number": "cube_int_instr_count",
    "aiv_vec_int16_ratio": "vec_int16_ratio",
    "aiv_vec_fops": "vector_fops",
    "aiv_vec_vf_ratio": "vec_vf_ratio",
    "aiv_vec_sfu_ratio": "vec_sfu_ratio",
    "aiv_vec_simt_vf_ratio": "vec_simt_vf_ratio",
    # Memory
    "aic_l1_read_bw(GB/s)": "l1_read_bw_gbs",
    "aic_l1_write_bw(GB/s)": "l1_write_bw_gbs",
    "aic_main_mem_read_bw(GB/s)": "cube_main_mem_read_bw_gbs",
    "aic_main_mem_write_bw(GB/s)": "cube_main_mem_write_bw_gbs",
    "aic_l2_read_bw(GB/s)": "cube_l2_read_bw_gbs",
    "aic_l2_write_bw(GB/s)": "cube_l2_write_bw_gbs",
    "aiv_ub_read_bw(GB/s)": "ub_read_bw_gbs",
    "aiv_ub_write_bw(GB/s)": "ub_write_bw_gbs",
    "aiv_main_mem_read_bw(GB/s)": "vector_main_mem_read_bw_gbs",
    "aiv_main_mem_write_bw(GB/s)": "vector_main_mem_write_bw_gbs",
    "aiv_l2_read_bw(GB/s)": "vector_l2_read_bw_gbs",
    "aiv_l2_write_bw(GB/s)": "vector_l2_write_bw_gbs",
    # Memory, msprof op (CANN 8.5 / 950): instruction counts, GM<->UB bandwidth, and per-row data volumes
    # without a core prefix (the row's sub_block says which core) -- never the MemoryAccess group
    "aic_mte1_instructions": "mte1_instr_count",
    "aic_mte2_instructions": "cube_mte2_instr_count",
    "aic_mte3_instructions": "cube_mte3_instr_count",
    "aiv_mte2_instructions": "vector_mte2_instr_count",
    "aiv_mte3_instructions": "mte3_instr_count",
    "aiv_ub_to_gm_bw(GB/s)": "ub_to_gm_bw_gbs",
    "aiv_gm_to_ub_bw(GB/s)": "gm_to_ub_bw_gbs",
    "read_main_memory_datas(KB)": "read_main_memory_kb",
    "write_main_memory_datas(KB)": "write_main_memory_kb",
    "GM_to_L1_datas(KB)": "gm_to_l1_kb",
    "GM_to_L1_bw_usage_rate(%)": "gm_to_l1_bw_usage_pct",
    "L1_to_GM_datas(KB)(estimate)": "l1_to_gm_kb_estimate",
    "L1_to_GM_bw_usage_rate(%)(estimate)": "l1_to_gm_bw_usage_pct_estimate",
    "L0C_to_L1_datas(KB)": "l0c_to_l1_kb",
    "L0C_to_L1_bw_usage_rate(%)": "l0c_to_l1_bw_usage_pct",
    "L0C_to_GM_datas(KB)": "l0c_to_gm_kb",
    "L0C_to_GM_bw_usage_rate(%)": "l0c_to_gm_bw_usage_pct",
    "GM_to_UB_datas(KB)": "gm_to_ub_kb",
    "GM_to_UB_bw_usage_rate(%)": "gm_to_ub_bw_usage_pct",
    "UB_to_GM_datas(KB)": "ub_to_gm_kb",
    "UB_to_GM_bw_usage_rate(%)": "ub_to_gm_bw_usage_pct",
    # MemoryL0
    "aic_l0a_read_bw(GB/s)": "l0a_read_bw_gbs",
    "aic_l0a_write_bw(GB/s)": "l0a_write_bw_gbs",
    "aic_l0b_read_bw(GB/s)": "l0b_read_bw_gbs",
    "aic_l0b_write_bw(GB/s)": "l0b_write_bw_gbs",
    "aic_l0c_read_bw_cube(GB/s)": "l0c_read_bw_gbs",
    "aic_l0c_write_bw_cube(GB/s)": "l0c_write_bw_gbs",
    "aiv_l0c_read_bw(GB/s)": "vector_l0c_read_bw_gbs",
    "aiv_l0c_write_bw(GB/s)": "vector_l0c_write_bw_gbs",
    # MemoryUB (the Memory group's aiv_ub_read_bw has no "_vector": exact names, never substrings)
    "aic_ub_read_bw_scalar(GB/s)": "cube_ub_read_bw_scalar_gbs",
    "aic_ub_write_bw_scalar(GB/s)": "cube_ub_write_bw_scalar_gbs",
    "aiv_ub_read_bw_vector(GB/s)": "ub_read_bw_vector_gbs",
    "aiv_ub_write_bw_vector(GB/s)": "ub_write_bw_vector_gbs",
    "aiv_ub_read_bw_scalar(GB/s)": "ub_read_bw_scalar_gbs",
    "aiv_ub_write_bw_scalar(GB/s)": "ub_write_bw_scalar_gbs",
    "aiv_ub_read_bw_gm(GB/s)": "ub_read_bw_gm_gbs",  # 950 MemoryUB: UB -> GM (documented as always NA today)
    "aiv_ub_write_bw_gm(GB/s)": "ub_write_bw_gm_gbs",  # 950 MemoryUB: GM -> UB
    # ResourceConflictRatio
    "aiv_vec_bankgroup_cflt_ratio": "vec_bankgroup_cflt_ratio",
    "aiv_vec_bank_cflt_ratio": "vec_bank_cflt_ratio",
    "aiv_vec_resc_cflt_ratio": "vec_resc_cflt_ratio",
    "aiv_vec_total_cflt_ratio": "vec_total_cflt_ratio",
    "aiv_vec_mte_cflt_ratio": "vec_mte_cflt_ratio",
    "aiv_vec_stu_cflt_ratio": "vec_stu_cflt_ratio",  # 950
    "aiv_vec_ldu_cflt_ratio": "vec_ldu_cflt_ratio",  # 950
    "aiv_vec_sfu_cflt_ratio": "vec_sfu_cflt_ratio",  # 950
    "aic_cube_wait_ratio": "cube_wait_ratio",
    "aic_mte1_wait_ratio": "mte1_wait_ratio",
    "aic_mte2_wait_ratio": "cube_mte2_wait_ratio",
    "aic_mte3_wait_ratio": "cube_mte3_wait_ratio",
    "aiv_vec_wait_ratio": "vec_wait_ratio",
    "aiv_mte1_wait_ratio": "vector_mte1_wait_ratio",
    "aiv_mte2_wait_ratio": "vector_mte2_wait_ratio",
    "aiv_mte3_wait_ratio": "mte3_wait_ratio",
    # L2Cache
    "aic_write_cache_hit": "cube_write_cache_hit",
    "aic_write_cache_miss_allocate": "cube_write_cache_miss_allocate",
    "aic_r0_read_cache_hit": "cube_r0_read_cache_hit",
    "aic_r0_read_cache_miss_allocate": "cube_r0_read_cache_miss_allocate",
    "aic_r1_read_cache_hit": "cube_r1_read_cache_hit",
    "aic_r1_read_cache_miss_allocate": "cube_r1_read_cache_miss_allocate",
    "aiv_write_cache_hit": "vector_write_cache_hit",
    "aiv_write_cache_miss_allocate": "vector_write_cache_miss_allocate",
    "aiv_r0_read_cache_hit": "vector_r0_read_cache_hit",
    "aiv_r0_read_cache_miss_allocate": "vector_r0_read_cache_miss_allocate",
    "aiv_r1_read_cache_hit": "vector_r1_read_cache_hit",
    "aiv_r1_read_cache_miss_allocate": "vector_r1_read_cache_miss_allocate",
    # L2Cache of the 950 generation: near ("close") / far hit, miss, victim counts (kept by the aic_/aiv_
    # fallback spelling) and hit rates in percent
    "aic_read_hit_rate(%)": "cube_read_hit_rate_pct",
    "aic_write_hit_rate(%)": "cube_write_hit_rate_pct",
    "aic_total_hit_rate(%)": "cube_total_hit_rate_pct",
    "aiv_read_hit_rate(%)": "vector_read_hit_rate_pct",
    "aiv_write_hit_rate(%)": "vector_write_hit_rate_pct",
    "aiv_total_hit_rate(%)": "vector_total_hit_rate_pct",
    # MemoryAccess (capitalisation differs between msprof code paths: looked up case-insensitively)
    "aic_read_main_memory_datas(KB)": "cube_read_main_memory_kb",
    "aic_write_main_memory_datas(KB)": "cube_write_main_memory_kb",
    "aic_GM_to_L1_datas(KB)": "cube_gm_to_l1_kb",
    "aic_L0C_to_L1_datas(KB)": "cube_l0c_to_l1_kb",
    "aic_L0C_to_GM_datas(KB)": "cube_l0c_to_gm_kb",
    "aic_GM_to_UB_datas(KB)": "cube_gm_to_ub_kb",
    "aic_UB_to_GM_datas(KB)": "cube_ub_to_gm_kb",
    "aiv_read_main_memory_datas(KB)": "vector_read_main_memory_kb",
    "aiv_write_main_memory_datas(KB)": "vector_write_main_memory_kb",
    "aiv_GM_to_L1_datas(KB)": "vector_gm_to_l1_kb",
    "aiv_L0C_to_L1_datas(KB)": "vector_l0c_to_l1_kb",
    "aiv_L0C_to_GM_datas(KB)": "vector_l0c_to_gm_kb",
    "aiv_GM_to_UB_datas(KB)": "vector_gm_to_ub_kb",
    "aiv_UB_to_GM_datas(KB)": "vector_ub_to_gm_kb",
}

_LOWER = {raw.lower(): canon for raw, canon in ASCEND_COLUMNS.items()}

# Canonical columns that are text; everything else a reader maps is numeric.
TEXT_COLUMNS = frozenset(
    {"name", "op_type", "core_type", "task_type", "op_state", "hf32_eligible", "context_id", "sub_block",
     "model_name"}
    | {"input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes", "output_formats"}
)
# Per-kernel context a kernel-table reader keeps when the file has the column (text, dictionary-encoded:
# a million rows hold a few hundred distinct shapes). ``task_type`` is the raw core column's value.
CONTEXT_COLUMNS = ("task_type", "op_state", "input_shapes", "input_dtypes", "output_shapes")
# Columns a kernel-table reader never needs (long strings or ids; skipping them keeps big files fast).
SKIPPED_COLUMNS = frozenset(
    {"input_formats", "output_dtypes", "output_formats"}
    | {"model_id", "task_id", "stream_id", "hf32_eligible", "context_id", "model_name", "infer_id"}
)
# The table columns of the canonical kernel frame; every other numeric column is a metric.
BASE_COLUMNS = ("name", "op_type", "core_type", "start_us", "duration_us", "wait_us", "block_dim",
                "mix_block_dim", "step", "device")
NOT_METRICS = frozenset(BASE_COLUMNS) | {"block_id", "sub_block", "count", "total_us", "min_us", "avg_us",
                                         "max_us", "ratio_pct", "block_size"}

_UNITS = (("(us)", "_us"), ("(gb/s)", "_gbs"), ("(kb)", "_kb"), ("(%)", "_pct"))


def _fallback_name(raw: str) -> str | None:
    """A PMU column this table does not list yet (a newer CANN): keep it, canonically spelled.

    ``aic_foo_bw(GB/s)`` -> ``cube_foo_bw_gbs``; names without an ``aic_``/``aiv_`` prefix are
    not PMU columns and are ignored (returns None).
    """
    low = raw.strip().lower()
    for prefix, side in (("aic_", "cube_"), ("aiv_", "vector_")):
        if low.startswith(prefix):
            name = side + low[len(prefix):]
            for unit, suffix in _UNITS:
                name = name.replace(unit, suffix)
            return re.sub(r"[^a-z0-9_]+", "_", name).strip("_")
    return None


def canonical(raw: str) -> str | None:
    """The canonical name of a raw Ascend header, or None when the column is not used."""
    key = raw.strip()
    if key in ASCEND_COLUMNS:
        return ASCEND_COLUMNS[key]
    return _LOWER.get(key.lower()) or _fallback_name(key)


def _side_of(raw: str) -> str | None:
    low = raw.lower()
    if low.startswith(("aic_", "aicore_")) or low == "cube_utilization(%)":
        return "cube"
    if low.startswith("aiv_"):
        return "vector"
    return None


CUBE_SIDE = frozenset(c for r, c in ASCEND_COLUMNS.items() if _side_of(r) == "cube")
VECTOR_SIDE = frozenset(c for r, c in ASCEND_COLUMNS.items() if _side_of(r) == "vector")


def side_of(column: str) -> str | None:
    """``cube`` / ``vector`` for a canonical PMU column (fallback names by prefix), else None."""
    if column in CUBE_SIDE or column.startswith("cube_"):
        return "cube"
    if column in VECTOR_SIDE or column.startswith("vector_"):
        return "vector"
    return None


# Accelerator Core / Task Type / Core Type values -> canonical core_type (§4.4).
CORE_TYPES: dict[str, str] = {
    "AI_CORE": "cube",
    "AI_VECTOR_CORE": "vector",
    "AIV": "vector",
    "MIX_AIC": "mix_aic",
    "MIX_AIV": "mix_aiv",
    "AI_CPU": "ai_cpu",
    "COMMUNICATION": "communication",
    "HCCL": "communication",
    "DSA_SQE": "dsa",
    "N/A": "unknown",
    "": "unknown",
}
# Tasks that are not device compute: not part of the kernel-time total (op_statistic leaves them out).
NON_COMPUTE_CORE_TYPES = frozenset({"communication"})

# -- aic_metrics groups: the one table ------------------------------------------------------------
# Canonical group name = torch_npu's ``AiCMetrics`` member name (docs/profiler-formats.md §9.4), except that
# "no counters" is stored as ``none`` (the member is ``AiCoreNone``). Per group:
# * ``aliases``: what ``collect --aic-metrics`` accepts, compared lower-cased with "_" and "-" dropped
#   (so ``Memory_UB``, ``memory-ub`` and ``ub`` all work; docs/practice.md §2); the first is the
#   short name the help lists.
# * ``acl``: the ACL name profiler_info*.json records in ``_aic_metrics`` (§3).
# * ``signature``: canonical columns whose presence shows a kernel table holds the group (§3).
# Table order is AiCMetrics' order; analyze lists found / not-collected groups in it.
NONE_GROUP = "none"


class MetricGroup(NamedTuple):
    """One aic_metrics group: its user spellings, ACL name and signature columns (see above)."""

    aliases: tuple[str, ...]
    acl: str
    signature: tuple[str, ...]


METRIC_GROUP_TABLE: dict[str, MetricGroup] = {
    "PipeUtilization": MetricGroup(("pipe", "pipeutilization"), "ACL_AICORE_PIPE_UTILIZATION",
                                   ("mac_ratio", "vec_ratio")),
    "ArithmeticUtilization": MetricGroup(("arith", "arithmeticutilization"), "ACL_AICORE_ARITHMETIC_UTILIZATION",
                                         ("mac_fp16_ratio", "vec_fp32_ratio", "cube_fp_ratio", "vec_vf_ratio")),
    "Memory": MetricGroup(("memory",), "ACL_AICORE_MEMORY_BANDWIDTH",
                          ("vector_main_mem_read_bw_gbs", "l1_read_bw_gbs", "ub_read_bw_gbs")),
    "MemoryL0": MetricGroup(("memoryl0",), "ACL_AICORE_L0B_AND_WIDTH", ("l0a_read_bw_gbs",)),
    "MemoryUB": MetricGroup(("ub", "memoryub"), "ACL_AICORE_MEMORY_UB",
                            ("ub_read_bw_vector_gbs", "ub_write_bw_gm_gbs")),
    "ResourceConflictRatio": MetricGroup(("conflict", "resourceconflictratio"), "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
                                         ("vec_bank_cflt_ratio", "vec_wait_ratio", "vec_stu_cflt_ratio")),
    "L2Cache": MetricGroup(("l2", "l2cache"), "ACL_AICORE_L2_CACHE",
                           ("cube_r0_read_cache_hit", "vector_r0_read_cache_hit", "cube_read_hit_rate_pct",
                            "vector_read_hit_rate_pct")),
    "MemoryAccess": MetricGroup(("memaccess", "memoryaccess"), "ACL_AICORE_MEMORY_ACCESS", ()),  # any *_kb column
    NONE_GROUP: MetricGroup(("none", "aicorenone"), "ACL_AICORE_NONE", ()),
}
# The order collect's --help, its "unknown metric group" hint and the README list the groups in: most
# used first (a presentation order only; every entry is a key of METRIC_GROUP_TABLE).
COLLECT_GROUP_ORDER: tuple[str, ...] = ("PipeUtilization", "MemoryUB", "Memory", "L2Cache", "ArithmeticUtilization",
                                        "MemoryAccess", "MemoryL0", "ResourceConflictRatio", NONE_GROUP)
# Groups that carry counters -> their signature columns (``none`` holds nothing to find).
METRIC_GROUPS: dict[str, tuple[str, ...]] = {g: m.signature for g, m in METRIC_GROUP_TABLE.items() if g != NONE_GROUP}
# profiler_info*.json ``_aic_metrics`` values (ACL names) -> group names; ACL_AICORE_NONE -> None.
ACL_METRIC_GROUPS: dict[str, str | None] = {m.acl: (None if g == NONE_GROUP else g)
                                            for g, m in METRIC_GROUP_TABLE.items()}


def metric_groups_of(columns) -> list[str]:
    """The aic_metrics groups whose signature columns are among ``columns`` (canonical names)."""
    cols = set(columns)
    found = [g for g, sig in METRIC_GROUPS.items() if sig and cols.intersection(sig)]
    # MemoryAccess columns carry a core prefix; msprof op's Memory.csv has unprefixed *_kb volumes
    if any(c.endswith("_kb") and c.startswith(("cube_", "vector_")) for c in cols):
        found.append("MemoryAccess")
    return found


# -- names shown to people: one label per displayed metric ---------------------------------------
# ``scalar_ratio``, ``mte2_ratio`` (max over both core halves) and ``ub_bw_vector_gbs`` (MemoryUB's
# vector read + write) are the per-kernel columns ``analyze.diagnosis`` derives; dram/l2 are the
# CUDA (ncu) view.
class MetricLabel(NamedTuple):
    """How one canonical metric column is named on screen."""

    short: str  # a column header of `ascendopt analyze`'s bottleneck table
    long: str  # a row label of the round summary


METRIC_LABELS: dict[str, MetricLabel] = {
    "mac_ratio": MetricLabel("mac", "Cube/MAC"),
    "vec_ratio": MetricLabel("vec", "Vector"),
    "scalar_ratio": MetricLabel("scalar", "Scalar"),
    "mte1_ratio": MetricLabel("mte1", "MTE1"),
    "mte2_ratio": MetricLabel("mte2", "MTE2"),
    "mte3_ratio": MetricLabel("mte3", "MTE3"),
    "fixpipe_ratio": MetricLabel("fixpipe", "Fixpipe"),
    "ub_bw_vector_gbs": MetricLabel("ub GB/s", "UB vector GB/s (read+write)"),
    "ub_read_bw_gbs": MetricLabel("ub read GB/s", "UB read GB/s"),
    "ub_write_bw_gbs": MetricLabel("ub write GB/s", "UB write GB/s"),
    "ub_read_bw_scalar_gbs": MetricLabel("ub scalar read GB/s", "UB scalar read GB/s"),
    "ub_write_bw_scalar_gbs": MetricLabel("ub scalar write GB/s", "UB scalar write GB/s"),
    "dram_ratio": MetricLabel("dram", "DRAM (ncu)"),
    "l2_ratio": MetricLabel("l2", "L2 (ncu)"),
}
# `ascendopt analyze`'s bottleneck table, left to right: (header, column); other metrics are in --json.
ANALYZE_TABLE_METRICS: tuple[tuple[str, str], ...] = tuple(
    (METRIC_LABELS[c].short, c) for c in ("mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio",
                                          "mte3_ratio", "fixpipe_ratio", "ub_bw_vector_gbs", "dram_ratio", "l2_ratio"))
# The round summary's rows (docs/practice.md §10): (label, canonical columns in preference order).
# Scalar/MTE2 exist on both core halves; the vector half comes first because most bundled kernels are
# vector kernels. UB rows: MemoryUB's vector-pipe traffic (``ub_bw_vector_gbs`` = read + write, what the
# ub_bandwidth_bound class checks), then the Memory group's plain UB columns.
_SUMMARY_ROWS = (  # (the METRIC_LABELS key of the row, its columns)
    ("mac_ratio", ("mac_ratio", "cube_utilization_pct")),
    ("vec_ratio", ("vec_ratio",)),
    ("scalar_ratio", ("vector_scalar_ratio", "cube_scalar_ratio", "scalar_ratio")),
    ("mte1_ratio", ("mte1_ratio",)),
    ("mte2_ratio", ("vector_mte2_ratio", "cube_mte2_ratio", "mte2_ratio")),
    ("mte3_ratio", ("mte3_ratio",)),
    ("ub_bw_vector_gbs", ("ub_bw_vector_gbs",)),
    ("ub_read_bw_gbs", ("ub_read_bw_vector_gbs", "ub_read_bw_gbs")),
    ("ub_write_bw_gbs", ("ub_write_bw_vector_gbs", "ub_write_bw_gbs")),
    ("ub_read_bw_scalar_gbs", ("ub_read_bw_scalar_gbs",)),
    ("ub_write_bw_scalar_gbs", ("ub_write_bw_scalar_gbs",)),
    ("dram_ratio", ("dram_ratio",)),
    ("l2_ratio", ("l2_ratio",)),
)
SUMMARY_METRICS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (METRIC_LABELS[key].long, columns) for key, columns in _SUMMARY_ROWS)

# -- Nsight Compute (`ncu --csv --page raw`) -> the same canonical columns ----------------------
# The CUDA mapping, one row per canonical column: raw metric names in order of preference (the
# first present wins; several names cover ncu versions and the sections collected), how to
# combine when several are wanted ("first" or "max"), and the scale to the canonical unit.
#
# | canonical               | ncu raw metric(s)                                           |
# |-------------------------|-------------------------------------------------------------|
# | duration_us             | gpu__time_duration.sum                                      |
# | mac_ratio               | sm__pipe_tensor_cycles_active (all MMA kinds), else hmma    |
# | vec_ratio               | max(sm__pipe_fma_cycles_active, sm__pipe_alu_cycles_active) |
# | dram_ratio              | gpu__dram_throughput (dram__throughput on older ncu)        |
# | l2_ratio                | lts__throughput                                             |
# | l1_ratio                | l1tex__throughput                                           |
# | sm_throughput_ratio     | sm__throughput                                              |
# | memory_throughput_ratio | gpu__compute_memory_throughput                              |
# | block_dim               | launch__grid_size                                           |
#
# | canonical               | means on an H200            | Ascend analogue            |
# |-------------------------|-----------------------------|----------------------------|
# | duration_us             | kernel time                 | Duration(us)               |
# | mac_ratio               | tensor-core pipe busy       | aic_mac_ratio (cube)       |
# | vec_ratio               | FP32 FMA / integer ALU busy | aiv_vec_ratio (vector)     |
# | dram_ratio              | HBM throughput of peak      | mte2/mte3: memory movement |
# | l2_ratio                | L2 throughput of peak       | memory movement            |
# | l1_ratio                | L1/shared throughput        | UB bandwidth               |
# | sm_throughput_ratio     | SM speed-of-light           | (overall compute)          |
# | memory_throughput_ratio | memory speed-of-light       | (overall memory)           |
# | block_dim               | blocks launched             | Block Dim                  |
#
# Percentages of peak are divided by 100 so they compare with Ascend ratios (0..1).
NCU_METRICS: dict[str, tuple[tuple[str, ...], str, float]] = {
    "duration_us": (("gpu__time_duration.sum",), "first", 1.0),  # unit row converts ns/us/ms
    "mac_ratio": (
        ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"), "first", 0.01),
    "vec_ratio": (
        ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
         "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"), "max", 0.01),
    "dram_ratio": (
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
         "dram__throughput.avg.pct_of_peak_sustained_elapsed"), "first", 0.01),
    "l2_ratio": (("lts__throughput.avg.pct_of_peak_sustained_elapsed",), "first", 0.01),
    "l1_ratio": (("l1tex__throughput.avg.pct_of_peak_sustained_active",), "first", 0.01),
    "sm_throughput_ratio": (("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "first", 0.01),
    "memory_throughput_ratio": (("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "first", 0.01),
    "block_dim": (("launch__grid_size",), "first", 1.0),
    "block_size": (("launch__block_size",), "first", 1.0),
}
# When a vec_ratio falls back to the "elapsed" variants (some sections only collect those).
NCU_FALLBACK: dict[str, tuple[str, ...]] = {
    "vec_ratio": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                  "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed"),
}
# ncu columns that describe the kernel or the device rather than measure it.
NCU_NAME = "Kernel Name"
NCU_DEVICE = {
    "chip": "device__attribute_display_name",
    "sm_count": "device__attribute_multiprocessor_count",
    "clock_khz": "device__attribute_clock_rate",
}
NCU_GROUPS = {"PipeUtilization": ("mac_ratio", "vec_ratio"), "Memory": ("dram_ratio", "l2_ratio")}

# -- this tool's own kernels.csv (cuda / cpu profile folders): already canonical -----------------
KERNELS_CSV_REQUIRED = ("name", "duration_us")
