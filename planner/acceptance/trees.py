"""Token trees as the engines state them: the shape, its verify and draft cost terms, its expected
acceptance length, and the sibling-rank parameter fitted on published chain/tree pairs.

A tree is a set of draft nodes, each a path of sibling ranks from the root (MEDUSA's "choices", vLLM's
`speculative_token_tree`, TensorRT-LLM's `eagle_choices`): (0,) is the draft's top-1 candidate at
depth 1, (1,) its rank-1 candidate, (0, 1) the rank-1 child of (0,). The root is the last verified
token; the verifier's prediction after the deepest accepted node is the bonus token. Paths are kept in
the engines' order: breadth-first, sorted by (len(path), path) (vLLM SpeculativeConfig.__post_init__,
TensorRT-LLM EagleDecodingConfig.check_eagle_choices).

Counting conventions (every count is per sequence and per verifier step):
- draft_nodes = len(paths) = vLLM `num_speculative_tokens` for a tree (vLLM's tests set
  num_speculative_tokens = len(spec_token_tree)) = TensorRT-LLM `max_total_draft_tokens`
  ("the number of all nodes in the tree (except the root)").
- verify_tokens_per_seq = draft_nodes + 1 (the root is recomputed with the drafts) = SGLang's
  `--speculative-num-draft-tokens` (sglang eagle_utils.organize_draft_results keeps
  `num_draft_token - 1` drafted nodes and build_tree_kernel_efficient prepends the bonus/root token).
  For a chain of K: K + 1, the planner's n = K + 1.
- draft_passes = drafter forward passes (sequential, EAGLE-style drafting): SGLang
  `--speculative-num-steps` (one draft-extend + num_steps - 1 decode steps); vLLM's propose_tree and
  TensorRT-LLM's `max_draft_len` = tree depth. MEDUSA-style parallel heads draft all depths in one pass;
  the caller's drafting mode decides that (planner.physics.serving.draft_passes).
- draft_tokens_per_pass[i] = tokens per sequence the drafter computes in pass i: 1 in the first pass
  (the newly verified token, as planner.physics.serving counts a chain's passes; the catch-up over the other
  accepted tokens is ignored there too), then SGLang's topk beams (`hidden_states.repeat_interleave
  (topk)` in select_top_k_tokens) or, for an explicit tree, the nodes of the previous level (vLLM
  propose_tree feeds `level_num_drafts` tokens per sequence per level).

Acceptance model (the one sibling model; the planner's default tree and stated trees both use it):
    q[d, r] = h[d, r] * prod_{s<r} (1 - h[d, s]),   h[d, r] = min(1, alpha_d * rank_decay ** r)
q[d, r] is the probability that the rank-r candidate at depth d+1 is the token the verifier accepts,
given its parent was accepted; h is that probability given the higher-ranked siblings were rejected.
Siblings are exclusive, so sum_r q[d, r] <= 1; rank 0 is accepted with alpha_d whatever the width, so a
width-1 tree is the chain; rank_decay = 1 is the geometric alpha * (1 - alpha)^r. The expected
acceptance length (bonus included) is
    tau = 1 + sum over nodes of prod_{(d, r) on the node's path} q[d, r].
SGLang's tree is dynamic: at each step it keeps the topk best-scoring beams, expands each by topk
children, and at the end keeps the num_draft_tokens - 1 best-scoring nodes of the whole pool
(select_top_k_tokens and organize_draft_results in sglang/srt/speculative). Scores are cumulative draft
probabilities; we model the draft as calibrated, so a node's score is its path acceptance probability
and the kept set is the greedy top-N by path probability, with a node's pool limited to the children
of the kept beams. This uses expected probabilities, so it is the static tree an average step would
keep; a per-step dynamic tree does a little better than that on real distributions.
"""

from __future__ import annotations

import ast
import heapq
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.acceptance import rates as acc
from planner.types import Method

Path = tuple[int, ...]

# Sibling-rank decay fitted by calibration.fitting.trees.fit_sibling_model on the training table's only
# chain/tree pair with a stated tree (published_specdec.csv PI4/PI5: Qwen3-8B, H100, SGLang v0.5.9, GSM8K; chain K=3 at
# tau 2.25, SGLang tree depth 3 x topk 4 with 21 verified tokens at tau 2.92). One tree row and one
# parameter: the fit is exact (residual 0); it predicts tau 2.46 for the same study's k=6 tree
# (depth 3 x topk 2), which a secondary summary of that study reports at 2.50 (not in the table).
# tests/planner/acceptance/test_trees.py re-fits it from the CSV and checks this constant.
DEFAULT_RANK_DECAY = 0.55
# Per-token alpha used only to pick which nodes an SGLang shape keeps when no alpha is given (paths,
# depth, level widths, the vLLM / TensorRT-LLM export): the middle of EAGLE-3's default and tuned
# ranges in the seed catalogue (0.62-0.68 default, 0.74-0.82 tuned).
REFERENCE_ALPHA = 0.7

# Bounds on a stated tree, checked before it is built: depth as the planner's K (planner.request.MAX_K); nodes far
# above the tens of verified tokens SGLang and vLLM trees use; SGLang's top-k bounds its candidate pool, which grows
# as topk^2 per step (_sglang_pool_size).
MAX_TREE_DEPTH = 32
MAX_TREE_NODES = 1024
MAX_SGLANG_TOPK = 32

SGLANG_STEPS_FLAG = "--speculative-num-steps"
SGLANG_TOPK_FLAG = "--speculative-eagle-topk"
SGLANG_DRAFT_TOKENS_FLAG = "--speculative-num-draft-tokens"


def _int_field(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise ValueError(f"{name}={value!r} is not an integer")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}={value} must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value} is not allowed: an integer from {minimum} to {maximum}")
    return value


def _bfs_order(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(sorted(paths, key=lambda p: (len(p), p)))


def _normalise_paths(paths: object, field_name: str) -> tuple[Path, ...]:
    """Paths as sorted tuples; ValueError naming the field and the offending path."""
    if isinstance(paths, str):
        try:
            paths = ast.literal_eval(paths)
        except (ValueError, SyntaxError) as exc:
            raise ValueError(f"{field_name}={paths!r} is not a Python/JSON list of paths") from exc
    if not isinstance(paths, (list, tuple)) or len(paths) == 0:
        raise ValueError(f"{field_name}={paths!r} must be a non-empty list of node paths")
    if len(paths) > MAX_TREE_NODES:
        raise ValueError(f"{field_name}: {len(paths):,} nodes; a tree verifies at most {MAX_TREE_NODES}")
    out: list[Path] = []
    given: dict[Path, object] = {}  # the node as the caller wrote it, for messages
    for raw in paths:
        if not isinstance(raw, (list, tuple)) or len(raw) == 0:
            raise ValueError(
                f"{field_name}: node {raw!r} is not a non-empty path of sibling ranks; the root () is implied"
            )
        if any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) for r in raw):
            raise ValueError(f"{field_name}: node {raw!r} has a non-integer sibling rank")
        path = tuple(int(r) for r in raw)
        if any(r < 0 for r in path):
            raise ValueError(f"{field_name}: node {raw!r} has a negative sibling rank")
        if len(path) > MAX_TREE_DEPTH:
            raise ValueError(f"{field_name}: node {raw!r} is at depth {len(path)}; a tree is at most "
                             f"{MAX_TREE_DEPTH} deep")
        if path in given:
            raise ValueError(f"{field_name}: node {raw!r} is listed twice")
        given[path] = raw
        out.append(path)
    for path in out:
        if len(path) > 1 and path[:-1] not in given:
            raw = given[path]
            parent = raw[:-1]  # type: ignore[index]
            raise ValueError(f"{field_name}: node {raw!r} has no parent {parent!r} in the tree")
    return _bfs_order(out)


def rank_acceptance(alpha_per_depth: np.ndarray | Sequence[float] | float, width: int,
                    rank_decay: np.ndarray | float = DEFAULT_RANK_DECAY) -> np.ndarray:
    """q[..., d, r]: P(rank-r candidate at depth d+1 is accepted | parent accepted); shape (..., D, width).

    alpha_per_depth: shape (..., D), conditional per-token acceptance of the top-1 candidate per depth.
    rank_decay: shape (...) or scalar, >= 0; h[d, r] = min(1, alpha_d * rank_decay^r).
    """
    a = np.asarray(alpha_per_depth, float)
    if a.ndim == 0:
        a = a[None]
    bad = ~((a >= 0.0) & (a <= 1.0))
    if np.any(bad):
        raise ValueError(f"alpha_per_depth={float(a[bad].flat[0])!r} is outside [0, 1]; it is a probability")
    d = np.asarray(rank_decay, float)
    if np.any(~(d >= 0.0)):
        raise ValueError(f"rank_decay={float(np.asarray(d).flat[0])!r} must be >= 0")
    width = _int_field("width", width, 1)
    r = np.arange(width, dtype=float)
    h = np.clip(a[..., :, None] * (d[..., None, None] ** r), 0.0, 1.0)
    survive = np.cumprod(1.0 - h, axis=-1)
    prev = np.concatenate([np.ones_like(survive[..., :1]), survive[..., :-1]], axis=-1)
    return h * prev


def _sglang_pool_size(num_steps: int, topk: int) -> int:
    # organize_draft_results: score_list is (b, 1, topk) for step 0 and (b, topk, topk) for each later
    # step, so the pool holds topk + (num_steps - 1) * topk^2 nodes.
    return topk + (num_steps - 1) * topk * topk


def _sglang_kept(num_steps: int, topk: int, num_draft_tokens: int, q: np.ndarray) -> list[tuple[Path, float]]:
    """SGLang's kept nodes for one q (D, W) with their path probabilities (see the module docstring)."""
    # Ties (equal path probability) go to the shallower, then lower-ranked node, so the kept set always
    # holds its parents (a child's probability never exceeds its parent's).
    def key(item: tuple[Path, float]) -> tuple[float, int, Path]:
        return (-item[1], len(item[0]), item[0])

    beams = [((r,), float(q[0, r])) for r in range(topk)]
    pool = list(beams)
    for step in range(1, num_steps):
        children = [(p + (r,), s * float(q[step, r])) for p, s in beams for r in range(topk)]
        pool.extend(children)
        beams = heapq.nsmallest(topk, children, key=key)
    return heapq.nsmallest(num_draft_tokens - 1, pool, key=key)


@dataclass(frozen=True)
class TreeShape:
    """A token tree as an engine is configured with it.

    paths: the draft nodes (root excluded), breadth-first. For an SGLang tree (sglang_topk set) they are
    the nodes SGLang keeps at REFERENCE_ALPHA and DEFAULT_RANK_DECAY; expected_acceptance_length
    re-selects them for the acceptance it is given.
    sglang_num_steps, sglang_topk: set only for SGLang's dynamic top-k tree (topk >= 2); a topk = 1
    SGLang configuration is the chain and is stored as one.
    """

    paths: tuple[Path, ...]
    sglang_num_steps: int | None = None
    sglang_topk: int | None = None
    _widths: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        paths = _normalise_paths(self.paths, "paths")
        object.__setattr__(self, "paths", paths)
        depth = max(len(p) for p in paths)
        widths = [0] * depth
        for p in paths:
            widths[len(p) - 1] += 1
        object.__setattr__(self, "_widths", tuple(widths))
        if (self.sglang_num_steps is None) != (self.sglang_topk is None):
            raise ValueError("sglang_num_steps and sglang_topk are set together (an SGLang tree) or not at all")

    # --- constructors -------------------------------------------------------------------------------

    @classmethod
    def chain(cls, k: int) -> TreeShape:
        """K draft tokens in a chain: K + 1 verified tokens, K draft passes."""
        return cls(acc.chain_tree(_int_field("k", k, 1, MAX_TREE_DEPTH)))

    @classmethod
    def planner_default(cls, depth: int, width: int = 3) -> TreeShape:
        """The planner's default tree, acceptance.default_tree(depth, width): `width` candidates at depth
        1, then the top-1 chain plus the rank-1 child of the top-1 path at each further depth."""
        depth = _int_field("depth", depth, 1, MAX_TREE_DEPTH)
        width = _int_field("width", width, 1, MAX_TREE_NODES)
        return cls(acc.default_tree(depth, width))

    @classmethod
    def default_for(cls, method: Method, k: int, *, width: int = 3, tree: bool = True) -> TreeShape:
        """What the planner verifies for a method at K: its default tree where the method verifies a
        tree (EAGLE-3, MEDUSA) and a tree is asked for, else the chain of K."""
        if tree and method.tree:
            return cls.planner_default(k, width)
        return cls.chain(k)

    @classmethod
    def uniform(cls, children_per_level: Sequence[int]) -> TreeShape:
        """Every node of level d-1 gets children ranked 0..c_d - 1 (the only trees vLLM drafts as
        stated; see to_vllm_speculative_token_tree). (4, 1, 1) = 4 candidates, each continued as a chain."""
        if len(children_per_level) == 0:
            raise ValueError("children_per_level=() must name at least one level")
        level: list[Path] = [()]
        paths: list[Path] = []
        for i, c in enumerate(children_per_level):
            c = _int_field(f"children_per_level[{i}]", c, 1, MAX_TREE_NODES)
            if len(level) * c > MAX_TREE_NODES:
                raise ValueError(f"children_per_level={tuple(children_per_level)!r} makes over {MAX_TREE_NODES} "
                                 "nodes; a tree verifies at most that many")
            level = [p + (r,) for p in level for r in range(c)]
            paths.extend(level)
        return cls(tuple(paths))

    @classmethod
    def from_sglang(cls, num_steps: int, topk: int, num_draft_tokens: int) -> TreeShape:
        """SGLang EAGLE: --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens.

        num_draft_tokens counts the root (SGLang's organize_draft_results keeps num_draft_tokens - 1
        drafted nodes; build_tree_kernel_efficient prepends the verified/bonus token), so it is the
        verify tokens per sequence. SGLang resets num_draft_tokens to num_steps + 1 when topk = 1
        (server_args); we reject any other value instead of changing it silently. The candidate pool is
        topk + (num_steps - 1) * topk^2 nodes (organize_draft_results), so at most that many + 1.
        """
        num_steps = _int_field("num_steps", num_steps, 1, MAX_TREE_DEPTH)
        topk = _int_field("topk", topk, 1, MAX_SGLANG_TOPK)
        num_draft_tokens = _int_field("num_draft_tokens", num_draft_tokens, 2, MAX_TREE_NODES + 1)
        if topk == 1:
            if num_draft_tokens != num_steps + 1:
                raise ValueError(
                    f"num_draft_tokens={num_draft_tokens} with topk=1 must be num_steps + 1 = {num_steps + 1}: "
                    "a topk-1 tree is the chain, and SGLang resets num_draft_tokens to num_steps + 1"
                )
            return cls.chain(num_steps)
        pool = _sglang_pool_size(num_steps, topk)
        if num_draft_tokens - 1 > pool:
            raise ValueError(
                f"num_draft_tokens={num_draft_tokens} exceeds the {pool + 1} tokens SGLang can verify with "
                f"num_steps={num_steps}, topk={topk}: topk + (num_steps - 1) * topk^2 = {pool} drafted "
                "candidates plus the root"
            )
        q = rank_acceptance(np.full(num_steps, REFERENCE_ALPHA), topk, DEFAULT_RANK_DECAY)
        kept = _sglang_kept(num_steps, topk, num_draft_tokens, q)
        return cls(tuple(p for p, _ in kept), sglang_num_steps=num_steps, sglang_topk=topk)

    @classmethod
    def from_vllm_token_tree(cls, paths: str | Sequence[Sequence[int]]) -> TreeShape:
        """vLLM's speculative_config["speculative_token_tree"]: a string holding a Python list of node
        tuples (vLLM parses it with ast.literal_eval and sorts it breadth-first), or that list itself."""
        return cls(_normalise_paths(paths, "speculative_token_tree"))

    @classmethod
    def from_trtllm_choices(cls, choices: str | Sequence[Sequence[int]]) -> TreeShape:
        """TensorRT-LLM EagleDecodingConfig.eagle_choices / MedusaDecodingConfig.medusa_choices: a list
        of paths as lists (or the string form TensorRT-LLM also accepts, "[[0], [1], [0, 0]]")."""
        return cls(_normalise_paths(choices, "eagle_choices"))

    # --- counts ---------------------------------------------------------------------------------------

    @property
    def is_sglang_dynamic(self) -> bool:
        return self.sglang_topk is not None

    @property
    def is_chain(self) -> bool:
        return not self.is_sglang_dynamic and all(w == 1 for w in self._widths)

    @property
    def draft_nodes(self) -> int:
        """Drafted tokens per sequence per step (root excluded): vLLM num_speculative_tokens."""
        return len(self.paths)

    @property
    def verify_tokens_per_seq(self) -> int:
        """Tokens the verifier computes per sequence per step, root included (SGLang num_draft_tokens)."""
        return len(self.paths) + 1

    @property
    def depth(self) -> int:
        """Deepest node: the most draft tokens one step can accept (bonus excluded)."""
        return len(self._widths)

    @property
    def level_widths(self) -> tuple[int, ...]:
        """Nodes per depth, depth 1 first."""
        return self._widths

    @property
    def draft_passes(self) -> int:
        """Sequential drafter forward passes per verifier step (SGLang num_steps; else the depth)."""
        return self.sglang_num_steps if self.sglang_num_steps is not None else self.depth

    @property
    def draft_tokens_per_pass(self) -> tuple[int, ...]:
        """Tokens per sequence in each drafter pass: 1, then SGLang's topk beams or the previous level's
        nodes (see the module docstring)."""
        if self.sglang_topk is not None and self.sglang_num_steps is not None:
            return (1,) + (self.sglang_topk,) * (self.sglang_num_steps - 1)
        return (1,) + self._widths[:-1]

    @property
    def max_draft_tokens_per_pass(self) -> int:
        return max(self.draft_tokens_per_pass)

    @property
    def draft_tokens_per_seq(self) -> int:
        """Tokens per sequence the drafter computes over all passes of one step."""
        return sum(self.draft_tokens_per_pass)

    @property
    def max_width(self) -> int:
        """The largest sibling rank + 1 (the width of q the acceptance needs)."""
        if self.sglang_topk is not None:
            return self.sglang_topk
        return max(max(p) for p in self.paths) + 1

    # --- engine formats -----------------------------------------------------------------------------

    def to_sglang_flags(self) -> list[str]:
        """SGLang server flags for this tree. Only SGLang trees and chains have them: SGLang builds its
        tree from topk at run time and takes no explicit node list (use as_sglang() for the nearest)."""
        if self.sglang_topk is not None and self.sglang_num_steps is not None:
            steps, topk = self.sglang_num_steps, self.sglang_topk
        elif self.is_chain:
            steps, topk = self.depth, 1
        else:
            raise ValueError(
                f"paths={list(self.paths)!r} is an explicit tree; SGLang has no flag for one (it builds "
                "its tree from --speculative-eagle-topk). Use TreeShape.from_sglang or as_sglang()"
            )
        return [SGLANG_STEPS_FLAG, str(steps), SGLANG_TOPK_FLAG, str(topk),
                SGLANG_DRAFT_TOKENS_FLAG, str(self.verify_tokens_per_seq)]

    def as_sglang(self) -> TreeShape:
        """The SGLang tree closest to this one: same depth, same verify tokens, topk = the most children
        any node (or the root) has. An approximation for explicit trees; itself for SGLang trees."""
        if self.is_sglang_dynamic or self.is_chain:
            return self
        children: dict[Path, int] = {}
        for p in self.paths:
            children[p[:-1]] = children.get(p[:-1], 0) + 1
        topk = max(children.values())
        n = min(self.verify_tokens_per_seq, _sglang_pool_size(self.depth, topk) + 1)
        return TreeShape.from_sglang(self.depth, topk, n)

    def to_vllm_speculative_token_tree(self) -> str:
        """The string vLLM's SpeculativeConfig.speculative_token_tree takes: str() of the list of node
        tuples, breadth-first, as vLLM writes its own default chain ("[(0,), (0, 0)]").

        vLLM drafts a tree level by level with child_drafts_per_level = nodes(level) // nodes(level-1)
        top-k children under every node of the previous level (vllm/v1/spec_decode/eagle.py), so it can
        only draft trees where every node of a level has children ranked 0..c-1; any other tree raises.
        """
        for d in range(1, self.depth + 1):
            parents: list[Path] = [()] if d == 1 else [p for p in self.paths if len(p) == d - 1]
            kids: dict[Path, list[int]] = {p: [] for p in parents}
            for p in self.paths:
                if len(p) == d:
                    kids[p[:-1]].append(p[-1])
            counts = {len(v) for v in kids.values()}
            ranks_ok = all(sorted(v) == list(range(len(v))) for v in kids.values())
            if len(counts) != 1 or not ranks_ok:
                uneven = {k: sorted(v) for k, v in kids.items()}
                raise ValueError(
                    f"paths: level {d} is not uniform (children ranks per parent {uneven!r}); vLLM drafts "
                    "the same top-c children under every node of a level. Use TreeShape.uniform(...)"
                )
        return str(list(self.paths))

    def vllm_speculative_config_fields(self) -> dict[str, int | str]:
        """The two speculative_config keys for this tree (num_speculative_tokens = draft nodes)."""
        return {"num_speculative_tokens": self.draft_nodes,
                "speculative_token_tree": self.to_vllm_speculative_token_tree()}

    def to_trtllm_choices(self) -> list[list[int]]:
        """TensorRT-LLM eagle_choices / medusa_choices: paths as lists, breadth-first. TensorRT-LLM sets
        max_draft_len to the deepest path and max_total_draft_tokens to len(choices)."""
        return [list(p) for p in self.paths]

    def trtllm_eagle_config(self) -> dict[str, object]:
        """An EagleDecodingConfig dict (speculative_config in the LLM API / extra options YAML). Note that
        TensorRT-LLM marks the static eagle_choices tree deprecated (to be removed in release 1.4)."""
        return {"decoding_type": "Eagle", "max_draft_len": self.depth, "eagle_choices": self.to_trtllm_choices()}


def parse_sglang_flags(flags: str | Sequence[str]) -> TreeShape:
    """The TreeShape of an SGLang command line (a string or argv list); other flags are ignored.
    Accepts "--flag value" and "--flag=value"; all three tree flags are required."""
    argv = shlex.split(flags) if isinstance(flags, str) else [str(f) for f in flags]
    wanted = {SGLANG_STEPS_FLAG: "num_steps", SGLANG_TOPK_FLAG: "topk", SGLANG_DRAFT_TOKENS_FLAG: "num_draft_tokens"}
    # Underscored spellings (--speculative_num_steps, as in ServerArgs field names) are read as dashes.
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        name, eq, val = tok.partition("=")
        name = name.replace("_", "-")
        if name in wanted:
            if not eq:
                if i + 1 >= len(argv):
                    raise ValueError(f"{name} has no value")
                val = argv[i + 1]
                i += 1
            values[wanted[name]] = val
        i += 1
    missing = [flag for flag, key in wanted.items() if key not in values]
    if missing:
        raise ValueError(f"flags={list(argv)!r} lack {', '.join(missing)}; SGLang would pick model-dependent defaults")
    return TreeShape.from_sglang(values["num_steps"], values["topk"], values["num_draft_tokens"])


def _alpha_for(shape: TreeShape, alpha_per_depth: np.ndarray | Sequence[float] | float) -> np.ndarray:
    a = np.asarray(alpha_per_depth, float)
    need = shape.draft_passes if shape.is_sglang_dynamic else shape.depth
    if a.ndim == 0:
        return np.broadcast_to(a[..., None], (need,)).copy()
    if a.shape[-1] < need:
        raise ValueError(
            f"alpha_per_depth has {a.shape[-1]} depths but the tree needs {need} (depth of {shape.paths[-1]!r}"
            + (f", SGLang num_steps={shape.sglang_num_steps})" if shape.is_sglang_dynamic else ")")
        )
    return a[..., :need]


def expected_acceptance_length(shape: TreeShape, alpha_per_depth: np.ndarray | Sequence[float] | float,
                               rank_decay: np.ndarray | float = DEFAULT_RANK_DECAY) -> np.ndarray:
    """Expected tokens per verifier step (bonus included): 1 + sum over nodes of the product of q along
    the node's path, q from rank_acceptance (the model and its parameters: module docstring).

    alpha_per_depth: scalar (the same alpha at every depth) or shape (..., D) with D >= the depth the
    tree needs (extra depths are ignored); rank_decay: scalar or shape (...). For an SGLang tree the
    kept nodes are re-selected (greedy top-N by path probability) for each alpha / rank_decay.
    """
    a = _alpha_for(shape, alpha_per_depth)
    d = np.asarray(rank_decay, float)
    batch = np.broadcast_shapes(a.shape[:-1], d.shape)
    a = np.broadcast_to(a, batch + a.shape[-1:])
    d = np.broadcast_to(d, batch)
    q = rank_acceptance(a, shape.max_width, d)  # (..., D, W)
    if shape.is_sglang_dynamic:
        assert shape.sglang_num_steps is not None and shape.sglang_topk is not None
        flat = q.reshape((-1,) + q.shape[-2:])
        out = np.empty(flat.shape[0])
        for i, qi in enumerate(flat):
            kept = _sglang_kept(shape.sglang_num_steps, shape.sglang_topk, shape.verify_tokens_per_seq, qi)
            out[i] = 1.0 + sum(s for _, s in kept)
        return out.reshape(batch)
    prob: dict[Path, np.ndarray] = {(): np.ones(batch)}
    total = np.ones(batch)
    for p in shape.paths:  # breadth-first, so the parent is already there
        prob[p] = prob[p[:-1]] * q[..., len(p) - 1, p[-1]]
        total = total + prob[p]
    return total
