"""The frameworks' own loaders, bounded: YAML as OmegaConf reads it, Hydra overrides as Hydra
parses and applies them, interpolations as OmegaConf resolves them (issue 46, R3).

- YAML: OmegaConf's loader (``omegaconf._utils.get_yaml_loader``: YAML 1.2 floats such as ``3e-4``,
  a key given twice in one mapping refused, merge keys ``<<`` and anchors/aliases as PyYAML builds
  them), after a bound on the composed document: ``MAX_DEPTH`` levels and ``MAX_NODES`` nodes with
  every alias expanded — an alias bomb (``a: &a [*b, *b, …]``) is refused in one line before any
  object is built;
- Hydra overrides (a YAML list ``- key=value``): ``hydra.core.override_parser.OverridesParser``;
  ``key=value`` sets, a key given again wins (Hydra applies them in order), ``+key`` adds (twice is
  Hydra's "Could not append" error), ``++key`` forces, ``~key`` deletes; sweeps are refused;
- interpolations ``${a.b}``, relative ``${.x}``/``${..x}``, chains, ``${oc.select:a.b,default}``,
  ``${oc.env:…}`` and string interpolation: ``OmegaConf.to_container(resolve=True)``, as verl's
  trainers call ``OmegaConf.resolve`` on their config; a reference to a key the file does not set
  is OmegaConf's error, in one line naming the key.
"""

from __future__ import annotations

from typing import Any

#: nesting a config may have (verl's deepest key is 6 levels); an alias-expanded document beyond
#: ``MAX_NODES`` nodes is refused (verl 0.9.1's full default config has about 2,000)
MAX_DEPTH = 64
MAX_NODES = 200_000


def load_yaml(text: str) -> Any:
    """``text`` as OmegaConf's YAML loader builds it, refused in one ``ValueError`` line when a key
    is given twice in one mapping or the document is deeper than ``MAX_DEPTH`` or larger than
    ``MAX_NODES`` nodes with aliases expanded."""
    import yaml
    from omegaconf._utils import get_yaml_loader

    loader = get_yaml_loader()
    try:
        root = yaml.compose(text, Loader=loader)  # noqa: S506 - OmegaConf's SafeLoader subclass
    except RecursionError:
        raise ValueError(f"config is nested deeper than the parser's recursion limit (at most {MAX_DEPTH} "
                         "levels are read)") from None
    if root is None:
        return None
    _bound(root)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506
    except yaml.constructor.ConstructorError as err:
        if "found duplicate key" in str(err.problem):
            key = str(err.problem).split("found duplicate key", 1)[1].strip()
            raise ValueError(f"config sets key {key!r} twice in one mapping (OmegaConf refuses this)") from None
        raise


def _bound(root) -> None:
    """Depth and alias-expanded size of a composed YAML node graph, each node visited once (sizes
    memoised by identity, so a bomb costs its text's length, not its expansion)."""
    import yaml

    sizes: dict[int, int] = {}
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"config is nested more than {MAX_DEPTH} levels deep (line {node.start_mark.line + 1}); "
                             "no framework config is")
        children = [] if isinstance(node, yaml.ScalarNode) else \
            [n for kv in node.value for n in kv] if isinstance(node, yaml.MappingNode) else list(node.value)
        unique = list({id(c): c for c in children}.values())
        if done:
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), MAX_NODES + 1)
            if sizes[id(node)] > MAX_NODES:
                raise ValueError(f"config expands to more than {MAX_NODES:,} values once its YAML aliases are "
                                 f"substituted (line {node.start_mark.line + 1}: an alias bomb?); refused before "
                                 "loading it")
        elif id(node) not in sizes:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in unique if id(c) not in sizes)


def apply_overrides(items: list) -> dict[str, Any]:
    """A list of Hydra overrides applied in order to an empty config, as Hydra applies command-line
    overrides: the nested dict (interpolations not yet resolved)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    lines = []
    for item in items:
        if not (isinstance(item, str) and ("=" in item or item.startswith("~"))):
            raise ValueError(f"config: a list config must hold Hydra overrides 'key=value', got {item!r}")
        lines.append(item)
    try:
        overrides = OverridesParser.create().parse_overrides(lines)
    except HydraException as err:
        raise ValueError(f"config: Hydra cannot parse its overrides: {' '.join(str(err).split())[:200]}") from None
    cfg = OmegaConf.create({})
    added: set[str] = set()
    for override in overrides:
        key = override.key_or_group
        if override.package is not None:
            raise ValueError(f"config: override {override.input_line!r} names a package (@); a config group "
                             "selection is not a setting the check reads")
        if override.is_sweep_override():
            raise ValueError(f"config: override {override.input_line!r} is a sweep (several runs); check one run")
        if override.type == OverrideType.DEL:
            _delete(cfg, key, override.input_line)
            continue
        if override.type == OverrideType.ADD and key in added:
            raise ValueError(f"config: override {override.input_line!r}: Hydra cannot append to config, an item is "
                             f"already at {key!r} (use ++{key} to force, or give it once)")
        if override.type in (OverrideType.ADD, OverrideType.FORCE_ADD):
            added.add(key)
        OmegaConf.update(cfg, key, override.value(), merge=True, force_add=True)
    return OmegaConf.to_container(cfg, resolve=False)


def _delete(cfg, key: str, line: str) -> None:
    from omegaconf import OmegaConf

    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if node is None or leaf not in node:
        raise ValueError(f"config: override {line!r} deletes {key!r}, which no earlier override sets "
                         "(the check reads the file alone, not verl's defaults under it)")
    del node[leaf]


def resolve(nested: dict) -> dict:
    """Every interpolation resolved as OmegaConf resolves it (absolute, relative, chained,
    ``oc.select``, ``oc.env``, inside strings); an unresolvable one is one ``ValueError`` line."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(OmegaConf.create(nested), resolve=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        message = str(err).split("\n")[0]
        where = f" at {key!r}" if key else ""
        raise ValueError(f"config{where} does not resolve (OmegaConf: {message[:200]}); the check reads the file "
                         "alone, so an interpolation must name a key it sets") from None
