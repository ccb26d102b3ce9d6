"""A run's tidy frame: its config as columns (bsuite style), its rows labelled with the run id,
and the metric columns two runs of different configs are compared on."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from sandbox.runtime.config import RunConfig


def config_columns(config: RunConfig) -> dict[str, object]:
    """The run's config as flat columns (bsuite style): scalar fields by name, dict fields flattened
    as ``field.key`` (``task_kwargs.K``, ``staleness.D``), lists and nested values as JSON."""
    columns: dict[str, object] = {}
    for key, value in config.to_dict().items():
        if key == "label":
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            name = key if sub is None else f"{key}.{sub}"
            columns[name] = v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v)
    return columns


def metrics_only(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without its config columns, run id and wall time: the numbers two runs of different
    configs can be compared on (e.g. D = 0 against the synchronous loop, bit for bit)."""
    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"seed"}
    drop = [c for c in frame.columns if c.split(".")[0] in fields or c in ("run_id", "wall_time")]
    return frame.drop(columns=drop).reset_index(drop=True)


def labelled(frame: pd.DataFrame, config: RunConfig) -> pd.DataFrame:
    """Prefix a run's rows with its run id and label and append its config columns."""
    frame.insert(0, "run_id", config.run_id)
    frame.insert(1, "label", config.label or config.estimator)
    extra = {k: v for k, v in config_columns(config).items() if k not in frame.columns}
    return pd.concat([frame, pd.DataFrame({k: [v] * len(frame) for k, v in extra.items()}, index=frame.index)],
                     axis=1)
