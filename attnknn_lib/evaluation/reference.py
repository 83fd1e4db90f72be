"""The tuned vote: a neighbour vote with every non-learned knob tuned on validation, the reference
every learned method is compared with.

One configuration is (rule, temperature, k, consistency threshold, prior exponent):

    w_j     = 1 (uniform), exp(-(r_j - r_1) / tau) (distance), exp((s_j - s_1) / T) (cosine),
              exp(-(j - 1) / d) (rank decay, d in :data:`DECAYS`: weights by rank alone)
    keep_j  = [loo_j >= theta]   (theta None: every neighbour votes; a row where none passes
                                  falls back to all of them)
    S_k(c)  = sum_{j <= k} keep_j w_j [y_j = c],    p_k = S_k / sum_c S_k(c)
    p'(c)   = p_k(c) pi_c^-beta / sum_c' p_k(c') pi_c'^-beta      (pi: the memory's class shares)

r_j is the Euclidean distance of the j-th nearest neighbour, s_j = 1 - r_j^2 / 2 its cosine
similarity, loo_j the share of that memory row's own nearest rows (itself excluded) that carry
its label (:func:`attnknn_lib.knn.headroom.loo_agreement`). Subtracting the nearest neighbour's
distance (or similarity) leaves every p_k unchanged and keeps the weights from underflowing.

Selection (``select``): by default the highest validation accuracy (ties between classes broken by
the nearest tied neighbour, :func:`attnknn_lib.knn.votes.break_ties`), then the lower validation
NLL; with ``select="nll"`` the lowest validation NLL, then the higher accuracy (the NLL-tuned vote, which a
calibration claim is judged against: the same search, tuned on the proper score). Every S_k of
one (rule, temperature, theta) comes from one cumulative sum over the neighbours, so the whole
grid costs little more than its largest k.

A memory whose class shares differ by less than :data:`BALANCED` (largest over smallest) gets no
prior correction: its correction would reweight the classes by less than the vote's own noise, and
skipping it saves nine tenths of the grid. Grids are extended where the choice sits on an open edge: the temperatures and decays by factors of 2.5 past
either end, beta by 0.5 past its largest value, each up to :data:`MAX_EXTENSIONS` times. k cannot
be extended past the neighbours searched: a choice at the largest k searched is reported in
``edges``, and the caller searches more neighbours and tunes again. Bounded ends (k = 1, beta = 0,
theta) are not edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.calibration import fit_calibrator
from attnknn_lib.evaluation.methods import T_GRID, TAU_GRID, MethodProbs
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import MAX_BETA, RULES, break_ties, prefix_class_scores, prior_correction

K_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
# consistency filter thresholds (None: off). A row's agreement takes the values j / loo_k (16 rows: steps of
# 1/16), so the grid reaches 1 (every one of its rows agrees): no choice can sit on an end that was never tried
THETAS = (None, 0.25, 0.5, 0.75, 0.875, 1.0)
FILTER = {"rules": ("uniform",), "thetas": THETAS[1:], "betas": (0.0,)}
"""The label-filtering baseline in the style of Bahri et al. (ICML 2020): memory rows whose own
neighbours do not back their label are dropped (threshold tuned), the rest vote uniformly (k tuned)."""
BETAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)  # prior-correction exponents
DECAYS = (1.0, 2.0, 4.0, 8.0, 16.0)  # rank-decay lengths (in neighbours), the geometry ceiling's grid
REFERENCE_RULES = (*RULES, "rank")  # the vote rules the tuned vote searches
PARAM_NAMES = {"distance": "tau", "cosine": "T", "rank": "decay"}  # a rule's parameter, as an edge is named
MAX_EXTENSIONS = 3  # times a grid is extended past an open edge
BALANCED = 1.5  # largest / smallest class share below which the prior exponent is not tuned
REFERENCE_K = 256  # neighbours searched first; doubled while the choice sits at the largest k
NLL_GAIN_TOL = 1e-3
"""An NLL-tuned choice at the largest k searched doubles k while a doubling lowers its validation NLL
by at least this much (a tenth of the NLL margin): a vote weighted by distance keeps gaining a
little NLL from ever farther neighbours, up to the whole memory, at a cost that grows with it."""
# the widest vote a later (NLL) selection searches on its own: under label noise a vote's NLL keeps
# falling as k grows, and its doubling reached the whole memory (54,000 rows x 6,000 queries held
# 22 GB and was killed for memory); at the cap its choice keeps "k" among its open edges,
# unless the search takes blocks of queries (``chunked``): then it goes on past the cap with the cap's memory
NLL_K_MAX = 4096
CHUNK_CELLS = 6000 * NLL_K_MAX
"""Past :data:`NLL_K_MAX`, a search that can take a subset of the queries (``chunked``) goes on in blocks of
at most this many (query, neighbour) cells, so its memory stays that of the cap whatever k it reaches."""
SELECTIONS = ("accuracy", "nll")  # what the tuned vote is tuned on (validation), the other breaking ties


@dataclass(frozen=True)
class Choice:
    """One configuration of the tuned vote, and how it did on validation."""

    rule: str
    param: float | None  # tau (distance) or T (cosine); None for uniform
    k: int
    theta: float | None
    beta: float
    val_accuracy: float = float("nan")
    val_nll: float = float("nan")

    def label(self) -> str:
        parts = [self.rule + (f" {self.param:g}" if self.param is not None else ""), f"k={self.k}"]
        return ", ".join(parts + knob_text(self.theta, self.beta))

    def to_dict(self) -> dict:
        return asdict(self)


def _weights(rule: str, param: float | None, sq_dist: np.ndarray) -> np.ndarray:
    """Unnormalised weights (N, K): the softmax numerators, shifted by the nearest neighbour's."""
    d = np.asarray(sq_dist, dtype=np.float64)
    if rule == "uniform":
        return np.ones_like(d)
    if rule == "distance":
        r = np.sqrt(np.maximum(d, 0.0))
        return np.exp(-(r - r[:, :1]) / param)
    if rule == "rank":
        return np.broadcast_to(np.exp(-np.arange(d.shape[1]) / param), d.shape)
    s = 1.0 - d / 2.0
    return np.exp((s - s[:, :1]) / param)


def reference_probs(choice: Choice, hood: Neighbourhood, prior: np.ndarray, num_classes: int) -> np.ndarray:
    """Probabilities (N, C) of one configuration on one split (see the module docstring)."""
    if choice.k > hood.k_max:
        raise ConfigError(f"k={choice.k} is out of range; allowed: 1..{hood.k_max} (neighbours searched)")
    return _probs(hood, choice.rule, choice.param, choice.theta, [choice.k], prior, num_classes,
                  (choice.beta,))[0][choice.beta]


def _unfiltered(hood: Neighbourhood, rule: str, param: float | None, ks: list[int],
                num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights (N, max ks), class scores (L, N, C) at each k of ``ks``) of (rule, param) with no
    label filter: what every filter threshold of the pair shares (the search computes it once)."""
    w = _weights(rule, param, hood.sq_dist[:, :max(ks)])
    return w, prefix_class_scores(w, hood.labels[:, :max(ks)], ks, num_classes)


def _probs(hood: Neighbourhood, rule: str, param: float | None, theta: float | None, ks: list[int],
           prior: np.ndarray, num_classes: int, betas: tuple[float, ...] | None = None,
           unfiltered: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict[float, np.ndarray]]:
    """For each k of ``ks``: {beta: probabilities (N, C)} of (rule, param, theta); ``unfiltered``:
    :func:`_unfiltered` of (rule, param, ks) when already computed."""
    w, scores = unfiltered if unfiltered is not None else _unfiltered(hood, rule, param, ks, num_classes)
    lab = hood.labels[:, :max(ks)]
    if theta is not None:
        kept = prefix_class_scores(w * (hood.loo[:, :max(ks)] >= theta), lab, ks, num_classes)
        empty = kept.sum(axis=2, keepdims=True) <= 0
        scores = np.where(empty, scores, kept)  # no neighbour passes: all of them vote
    p = scores / scores.sum(axis=2, keepdims=True)
    betas = betas if betas is not None else (0.0,)
    out = []
    for i, k in enumerate(ks):
        out.append({b: break_ties(prior_correction(p[i], prior, b) if b else p[i], lab[:, :k]) for b in betas})
    return out


def _extend(grid: tuple[float, ...], best: float, factor: float) -> tuple[float, ...] | None:
    """The grid extended past the end that ``best`` sits on (by ``factor``), or None if it is inside."""
    if best == max(grid):
        return tuple(sorted(set(grid) | {max(grid) * factor}))
    if best == min(grid):
        return tuple(sorted(set(grid) | {min(grid) / factor}))
    return None


def _grow(choice: Choice, grids: dict[str, tuple], betas: tuple[float, ...]) -> tuple[tuple[float, ...], bool]:
    """Grids extended where ``choice`` sits on an open edge: its rule's parameter grid (in place, by a
    factor of 2.5) and the prior exponents (by 0.5 up to :data:`MAX_BETA`); the betas and whether
    anything grew."""
    grown = False
    if choice.rule != "uniform":
        wider = _extend(grids[choice.rule], choice.param, 2.5)
        if wider is not None:
            grids[choice.rule], grown = wider, True
    if 0 < choice.beta == max(betas) and choice.beta + 0.5 <= MAX_BETA:
        betas, grown = tuple(betas) + (max(betas) + 0.5,), True
    return betas, grown


def knob_text(theta: float | None, beta: float) -> list[str]:
    """The label's words for the filter and the prior correction (none when off)."""
    return ([f"filter {theta:g}"] if theta is not None else []) + ([f"prior {beta:g}"] if beta else [])


def _key(select: str, acc: float, loss: float) -> tuple[float, float]:
    return (acc, -loss) if select == "accuracy" else (-loss, acc)


def _search(val: Neighbourhood, target: np.ndarray, prior: np.ndarray, num_classes: int, grids: dict[str, tuple],
            betas: tuple[float, ...], thetas: tuple, ks: list[int], done: set,
            best: dict[str, tuple[Choice, tuple]]) -> dict[str, tuple[Choice, tuple]]:
    """For each selection of ``best`` (its keys), the best of ``best`` and every configuration of the
    grids not in ``done`` (which grows): by (accuracy, -NLL) or, for "nll", by (-NLL, accuracy) on
    validation. One pass scores every configuration for every selection."""
    best = dict(best)
    for rule in grids:
        for param in grids[rule]:
            shared = None  # the pair's unfiltered weights and scores, computed once for all its thetas
            for theta in thetas:
                todo = [b for b in betas if (rule, param, theta, ks[-1], b) not in done]
                if not todo:
                    continue
                shared = shared or _unfiltered(val, rule, param, ks, num_classes)
                for k, by_beta in zip(ks, _probs(val, rule, param, theta, ks, prior, num_classes, tuple(todo),
                                                 shared)):
                    for beta, p in by_beta.items():
                        done.add((rule, param, theta, k, beta))
                        acc = accuracy(p, target)
                        if "nll" not in best and best.get("accuracy") and acc < best["accuracy"][1][0]:
                            continue  # cannot win on accuracy: skip its NLL
                        loss = nll(p, target)
                        for select, current in best.items():
                            key = _key(select, acc, loss)
                            if current is None or key > current[1]:
                                best[select] = (Choice(rule, param, k, theta, beta, acc, loss), key)
    return best


def tune_references(val: Neighbourhood, target: np.ndarray, prior: np.ndarray, num_classes: int,
                    ks: tuple[int, ...] = K_LADDER, thetas: tuple = THETAS,
                    betas: tuple[float, ...] = BETAS, rules: tuple[str, ...] = REFERENCE_RULES,
                    selects: tuple[str, ...] = ("accuracy",)) -> dict[str, dict]:
    """:func:`tune_reference` for several selections in one search: ``{select: tuned}``. The first
    selection drives the search (its grids are extended where its choice sits on an open edge, as
    when it is tuned alone, so its choice is the same); the others are chosen among the same
    configurations and report their own open edges."""
    for select in selects:
        if select not in SELECTIONS:
            raise ConfigError(f"select={select!r} is not allowed; choose one of: {', '.join(SELECTIONS)}")
    target = np.asarray(target)
    prior = np.asarray(prior, dtype=np.float64)
    present = prior[prior > 0]
    if present.size and present.max() / present.min() < BALANCED:
        betas = (0.0,)
    k_list = sorted({k for k in ks if k <= val.k_max} | {val.k_max})  # the widest k searched is always scored
    grids = {r: g for r, g in (("uniform", (None,)), ("distance", tuple(TAU_GRID)), ("cosine", tuple(T_GRID)),
                               ("rank", DECAYS)) if r in rules}
    done: set = set()
    best: dict = {select: None for select in selects}
    for round_ in range(MAX_EXTENSIONS + 1):
        best = _search(val, target, prior, num_classes, grids, betas, thetas, k_list, done, best)
        if round_ == MAX_EXTENSIONS:
            break  # no more growth: an edge still open is reported below
        betas, grown = _grow(best[selects[0]][0], grids, betas)  # the first selection drives the growth
        if not grown:
            break
    out = {}
    for select, (choice, _) in best.items():
        edges = []
        if choice.k == k_list[-1]:
            edges.append("k")
        if choice.rule != "uniform" and _extend(grids[choice.rule], choice.param, 2.5) is not None:
            edges.append(PARAM_NAMES[choice.rule])
        if choice.beta == max(betas) and choice.beta > 0:
            edges.append("beta")
        out[select] = {"choice": choice, "configs": len(done), "edges": edges,
                       "grids": {"k": k_list, "tau": list(grids.get("distance", ())), "T": list(grids.get("cosine", ())),
                                 "decay": list(grids.get("rank", ())), "theta": list(thetas), "beta": list(betas)}}
    return out


def tune_reference(val: Neighbourhood, target: np.ndarray, prior: np.ndarray, num_classes: int,
                   ks: tuple[int, ...] = K_LADDER, thetas: tuple = THETAS,
                   betas: tuple[float, ...] = BETAS, rules: tuple[str, ...] = REFERENCE_RULES,
                   select: str = "accuracy") -> dict:
    """The best configuration on validation (by ``select``, see the module docstring), with the grids
    extended past open edges.

    Returns {"choice": :class:`Choice`, "configs": configurations scored (the tuning budget),
    "edges": knobs whose choice still sits on an open edge ("k" when it is the largest k searched),
    "grids": the final grids}. ``prior`` (C,) is the memory's class shares."""
    return tune_references(val, target, prior, num_classes, ks, thetas, betas, rules, (select,))[select]


def _config_sums(val: Neighbourhood, target: np.ndarray, prior: np.ndarray, num_classes: int, grids: dict[str, tuple],
                 betas: tuple[float, ...], thetas: tuple, ks: list[int], done: set) -> dict[tuple, tuple[float, float]]:
    """Per configuration (rule, param, theta, k, beta) of the grids not in ``done``: (correct
    predictions, summed NLL) over ``val``'s queries, the additive parts of validation accuracy and NLL."""
    out, n = {}, len(target)
    for rule in grids:
        for param in grids[rule]:
            shared = None
            for theta in thetas:
                todo = [b for b in betas if (rule, param, theta, ks[-1], b) not in done]
                if not todo:
                    continue
                shared = shared or _unfiltered(val, rule, param, ks, num_classes)
                for k, by_beta in zip(ks, _probs(val, rule, param, theta, ks, prior, num_classes, tuple(todo), shared)):
                    for beta, p in by_beta.items():
                        out[(rule, param, theta, k, beta)] = (accuracy(p, target) * n, nll(p, target) * n)
    return out


def tune_chunked(hood_of: Callable[[np.ndarray], Neighbourhood], target: np.ndarray, prior: np.ndarray,
                 num_classes: int, k_max: int, chunk: int, select: str = "nll", ks: tuple[int, ...] = K_LADDER,
                 thetas: tuple = THETAS, betas: tuple[float, ...] = BETAS,
                 rules: tuple[str, ...] = REFERENCE_RULES) -> dict:
    """:func:`tune_reference` with the validation queries taken ``chunk`` at a time (``hood_of(idx)``:
    the ``k_max`` nearest rows of queries ``idx``): validation accuracy and NLL are means over the
    queries, so summing each configuration's parts over the blocks gives the same choice, edges and
    grids with the memory of one block."""
    target = np.asarray(target)
    prior = np.asarray(prior, dtype=np.float64)
    present = prior[prior > 0]
    if present.size and present.max() / present.min() < BALANCED:
        betas = (0.0,)
    n = len(target)
    k_list = sorted({k for k in ks if k <= k_max} | {k_max})
    grids = {r: g for r, g in (("uniform", (None,)), ("distance", tuple(TAU_GRID)), ("cosine", tuple(T_GRID)),
                               ("rank", DECAYS)) if r in rules}
    sums: dict[tuple, list[float]] = {}
    for round_ in range(MAX_EXTENSIONS + 1):
        new: dict[tuple, list[float]] = {}
        for s in range(0, n, chunk):
            idx = np.arange(s, min(n, s + chunk))
            for key, parts in _config_sums(hood_of(idx), target[idx], prior, num_classes, grids, tuple(betas), thetas,
                                           k_list, set(sums)).items():
                acc = new.setdefault(key, [0.0, 0.0])
                acc[0], acc[1] = acc[0] + parts[0], acc[1] + parts[1]
        sums.update(new)
        best = max(sums, key=lambda c: _key(select, sums[c][0] / n, sums[c][1] / n))  # first of equals, as _search
        rule, param, theta, k, beta = best
        choice = Choice(rule, param, k, theta, beta, sums[best][0] / n, sums[best][1] / n)
        if round_ == MAX_EXTENSIONS:
            break
        betas, grown = _grow(choice, grids, betas)
        if not grown:
            break
    edges = (["k"] if choice.k == k_list[-1] else []) + (
        [PARAM_NAMES[choice.rule]] if choice.rule != "uniform" and _extend(grids[choice.rule], choice.param, 2.5)
        is not None else []) + (["beta"] if choice.beta == max(betas) and choice.beta > 0 else [])
    return {"choice": choice, "configs": len(sums), "edges": edges,
            "grids": {"k": k_list, "tau": list(grids.get("distance", ())), "T": list(grids.get("cosine", ())),
                      "decay": list(grids.get("rank", ())), "theta": list(thetas), "beta": list(betas)}}


Search = Callable[[str, int], tuple[np.ndarray, np.ndarray]]  # (split, k) -> memory rows, squared distances
"""With ``chunked``, :func:`reference_methods` also calls ``search(split, k, idx)``: the k nearest rows of the
split's queries ``idx`` only (the searches of :func:`attnknn_lib.experiments.common.shared.searcher` take it)."""


def reference_methods(search: Search, memory_labels: np.ndarray, loo: np.ndarray, val_y: np.ndarray,
                      num_classes: int, k_start: int = REFERENCE_K, selects: tuple[str, ...] = ("accuracy",),
                      chunked: bool = False, **space) -> dict[str, MethodProbs]:
    """The tuned reference on one memory, per selection of ``selects`` from one search: validation
    and test probabilities, and in ``info`` the choice, its label, the configurations scored, the
    open edges left and the neighbours searched.

    ``search(split, k)`` returns the k nearest memory rows of the split's queries ("val" or
    "test") with their squared distances; ``memory_labels`` (M,) are the labels the vote reads
    (noisy ones under label noise), ``loo`` (M,) each row's leave-one-out agreement, ``val_y`` the
    validation targets; ``space`` narrows the search (``rules``, ``thetas``, ``betas`` of
    :func:`tune_reference`). Neighbours are searched to ``k_start`` and doubled while a choice sits
    at the largest k searched, up to the whole memory (the first selection decides, so its choice is
    the one it makes alone; a later selection whose choice still sits at the largest k searches on,
    doubling the same way, on its own, up to :data:`NLL_K_MAX` neighbours, the NLL selection while a doubling gains at least
    :data:`NLL_GAIN_TOL`); test is searched once, to the chosen k. With ``chunked`` (``search`` takes the
    queries' indices, :data:`Search`), the later selection goes on past :data:`NLL_K_MAX` up to the whole
    memory, in blocks of queries (:func:`tune_chunked`, :data:`CHUNK_CELLS`): the cap no longer binds."""
    memory_labels = np.asarray(memory_labels, dtype=np.int64)
    loo = np.asarray(loo, dtype=np.float64)
    m = len(memory_labels)
    prior = np.bincount(memory_labels, minlength=num_classes) / m
    k = min(k_start, m)
    while True:
        rows, sq = search("val", k)
        hood = Neighbourhood(memory_labels[rows], sq, rows, loo[rows])
        tuned = tune_references(hood, val_y, prior, num_classes, selects=selects, **space)
        if "k" not in tuned[selects[0]]["edges"] or k >= m:
            break
        k = min(2 * k, m)
    def hood_of(split: str, kk: int, idx: np.ndarray | None = None) -> Neighbourhood:
        rows, sq = search(split, kk) if idx is None else search(split, kk, idx)
        return Neighbourhood(memory_labels[rows], sq, rows, loo[rows])

    searched = {select: (k, hood) for select in selects}
    top = m if chunked else min(m, NLL_K_MAX)
    for select in selects[1:]:  # a later selection at the largest k: its own search, doubled the same way
        kk = k
        while "k" in tuned[select]["edges"] and kk < top:
            kk = min(2 * kk, top) if kk >= NLL_K_MAX else min(2 * kk, top, NLL_K_MAX)
            before = tuned[select]["choice"].val_nll
            if kk <= NLL_K_MAX:
                wider = hood_of("val", kk)
                tuned[select] = tune_references(wider, val_y, prior, num_classes, selects=(select,), **space)[select]
            else:  # past the cap: the same search in blocks of queries (its memory stays the cap's)
                wider = None
                tuned[select] = tune_chunked(lambda idx, kk=kk: hood_of("val", kk, idx), val_y, prior, num_classes, kk,
                                             max(1, CHUNK_CELLS // kk), select, **space)
            searched[select] = (kk, wider)
            gain = before - tuned[select]["choice"].val_nll
            if select == "nll" and gain < NLL_GAIN_TOL:  # what lies further is worth less than the tolerance
                tuned[select]["k_gain"] = gain
                break
    out = {}
    for select, t in tuned.items():
        k_sel, hood = searched[select]
        if k_sel >= m and "k" in t["edges"]:
            t["edges"].remove("k")  # every memory row votes: that end is bounded
        choice = t["choice"]
        if choice.k <= NLL_K_MAX:
            val_p = reference_probs(choice, hood if hood is not None else hood_of("val", choice.k), prior, num_classes)
            test_p = reference_probs(choice, hood_of("test", choice.k), prior, num_classes)
        else:  # a vote wider than the cap: its probabilities in blocks of queries too
            def blocked(split: str, n: int, choice: Choice = choice) -> np.ndarray:
                blocks = np.array_split(np.arange(n), max(1, -(-n * choice.k // CHUNK_CELLS)))
                return np.concatenate([reference_probs(choice, hood_of(split, choice.k, idx), prior, num_classes)
                                       for idx in blocks])
            val_p, test_p = blocked("val", len(val_y)), blocked("test", len(search("test", 1)[0]))
        info = {"choice": choice.to_dict(), "label": choice.label(), "configs": t["configs"],
                "edges": t["edges"], "k_searched": k_sel, "grids": t["grids"]}
        if "k_gain" in t:  # NLL selection stopped by NLL_GAIN_TOL: its last doubling's gain
            info["k_gain"] = t["k_gain"]
        out[select] = MethodProbs(val_p, test_p, info)
    return out


def reference_method(search: Search, memory_labels: np.ndarray, loo: np.ndarray, val_y: np.ndarray,
                     num_classes: int, k_start: int = REFERENCE_K, select: str = "accuracy", **space) -> MethodProbs:
    """The reference tuned on ``select`` (:func:`reference_methods` with one selection)."""
    return reference_methods(search, memory_labels, loo, val_y, num_classes, k_start, (select,), **space)[select]


def references(search: Search, memory_labels: np.ndarray, loo: np.ndarray, val_y: np.ndarray,
               num_classes: int, k_start: int = REFERENCE_K, chunked: bool = False) -> tuple[MethodProbs, MethodProbs]:
    """The tuned vote of an accuracy claim and the NLL-tuned vote of a calibration claim, from one search.

    The first is tuned on validation accuracy, exactly as :func:`reference_method` tunes it alone
    (the accuracy selection drives the search). The second is the same search tuned on validation NLL:
    a vote's raw NLL is dominated by the classes it gives no vote, so a choice made on it can
    calibrate worse than the accuracy-tuned one, and the calibration reference is whichever of the
    two has the lower validation NLL after its own calibrator
    (:func:`~attnknn_lib.evaluation.calibration.fit_calibrator`, fitted on validation), the NLL every
    method is compared on. Its ``info["tuned_on"]`` says which, ``info["candidates"]`` gives both
    validation NLLs. ``chunked``: see :func:`reference_methods` (the NLL search past its cap)."""
    val_y = np.asarray(val_y)
    found = reference_methods(search, memory_labels, loo, val_y, num_classes, k_start, SELECTIONS, chunked)
    cal_nll = {sel: nll(fit_calibrator(m.val, val_y).apply(m.val), val_y) for sel, m in found.items()}
    pick = min(SELECTIONS, key=lambda s: (cal_nll[s], SELECTIONS.index(s)))
    best = found[pick]
    return found["accuracy"], MethodProbs(best.val, best.test, {**best.info, "tuned_on": pick, "candidates": {
        sel: {"label": m.info["label"], "val_nll_calibrated": cal_nll[sel]} for sel, m in found.items()}})
