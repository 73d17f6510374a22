"""Policy specs, the --eps and --budgets strings: per-policy parameters (spec keys, or the
options that are their defaults), calibrated values and the refusal to override them silently,
the sweeps, and the controls run at every sampling."""

from __future__ import annotations

import pytest

from divscope.decoding.gates import Calibration, Gate
from divscope.decoding.policies import (
    RL,
    Base,
    BaseGreedy,
    Early,
    EntropyGated,
    Forward,
    Gated,
    Rast,
    Reverse,
    RLReplace,
)
from divscope.decoding.settings import (
    Policies,
    parse_budgets,
    parse_eps,
    parse_names,
    parse_spec,
    parse_specs,
)
from divscope.defaults import REPLACE_TEMPERATURE, REPLACE_TOP_P, TEMPERATURE, TOP_P
from divscope.errors import DivscopeError
from divscope.scoring.metrics import StatsConfig

REPLACED = {"temperature": 0.6, "top_p": 0.95}


def _policies(text, *, temperature=TEMPERATURE, top_p=TOP_P, **defaults):
    """The policies of `--policy text` with the options `defaults`, at the run's sampling."""
    return Policies(text, **defaults).build(StatsConfig(top_p=top_p, temperature=temperature))


@pytest.fixture
def calibration(tmp_path):
    path = tmp_path / "gate.json"
    gates = {"gated": (Gate(0.1, tau=2.0, lam=1.5),), "entropy": (Gate(0.1, tau=0.5, lam=3.0),)}
    Calibration(rates=(0.1,), window=8, gates=gates, n_tokens=10, source="t").to_json(path)
    return path


@pytest.mark.parametrize(
    "text,expected", [("0,1,2,-1", (0, 1, 2, -1)), ("4", (4,)), (" 0, 8 ", (0, 8))]
)
def test_parse_budgets(text, expected):
    assert parse_budgets(text) == expected


@pytest.mark.parametrize("text", ["", "1,,2", "a,b", "1.5", "-2"])
def test_parse_budgets_errors(text):
    with pytest.raises(DivscopeError, match="--budgets"):
        parse_budgets(text)


@pytest.mark.parametrize(
    "text,expected", [("0.05", (0.05,)), ("0.01, 0.05,0.1", (0.01, 0.05, 0.1)), ("-1", (-1.0,))]
)
def test_parse_eps(text, expected):
    assert parse_eps(text) == expected


@pytest.mark.parametrize(
    "text,message", [("", "expected a number"), ("0.1,x", "expected a number"),
                     ("0.1,0.1", "appears twice")]
)  # fmt: skip
def test_parse_eps_errors(text, message):
    with pytest.raises(DivscopeError, match=message):
        parse_eps(text)


def test_parse_names():
    assert parse_names(" base, rl-replace,,gated ") == ["base", "rl-replace", "gated"]


def test_each_policy_takes_its_own_flags():
    policies = _policies(
        "gated,entropy,rast,early,forward,reverse",
        eps=(0.01, 0.1), early_share=0.25, rast_lam=2.0,
        gate_tau=1.0, gate_lam=1.5, gate_window=4,
        entropy_tau=0.3, entropy_lam=2.5, entropy_window=6,
    )  # fmt: skip
    assert policies == [
        Gated(tau=1.0, lam=1.5, window=4),
        EntropyGated(tau=0.3, lam=2.5, window=6),
        Rast(lam=2.0),
        Early(share=0.25),
        Forward(eps=0.01),
        Forward(eps=0.1),
        Reverse(eps=0.01),
        Reverse(eps=0.1),
    ]


def test_one_eps_and_the_defaults():
    policies = _policies("forward,rast,early,entropy", eps=0.05, entropy_tau=1.0,
                              entropy_lam=2.0)  # fmt: skip
    assert policies == [Forward(eps=0.05), Rast(lam=1.0), Early(), EntropyGated(1.0, 2.0, 16)]


def test_calibrated_values_fill_what_is_not_given(calibration):
    policies = _policies(" base, rl-replace,gated,entropy ", calibration=calibration,
                              replace_top_p=0.9)  # fmt: skip
    assert policies == [
        Base(),
        Base(temperature=0.6, top_p=0.9),
        RLReplace(temperature=0.6, top_p=0.9),
        Gated(tau=2.0, lam=1.5, window=8, rate=0.1),
        EntropyGated(tau=0.5, lam=3.0, window=8, rate=0.1),
        RL(temperature=0.6, top_p=0.9),
    ]


@pytest.mark.parametrize(
    "flags,message",
    [
        ({"gate_lam": 1.0}, "--gate-lam 1.0 replaces the value 1.5 that --calibration"),
        ({"entropy_tau": 0.7}, "--entropy-tau 0.7 replaces the value 0.5"),
        ({"gate_window": 4}, "--gate-window 4 replaces the value 8"),
    ],
)
def test_a_flag_that_replaces_a_calibrated_value_is_refused(calibration, flags, message):
    with pytest.raises(DivscopeError, match=message) as error:
        _policies("gated,entropy", calibration=calibration, **flags)
    assert "--override-calibration" in str(error.value)


def test_override_calibration_applies_the_flag_with_a_note(calibration, capsys):
    policies = _policies(
        "gated,entropy", calibration=calibration, gate_lam=1.0, override_calibration=True
    )
    assert policies == [Gated(2.0, 1.0, 8, rate=0.1), EntropyGated(0.5, 3.0, 8, rate=0.1)]
    notes = capsys.readouterr().err.splitlines()
    assert notes == [
        f"note: --gate-lam 1.0 replaces the value 1.5 that --calibration {calibration} "
        "calibrated for 'gated' at rate 0.1 (--override-calibration)."
    ]


def test_a_flag_equal_to_the_calibrated_value_replaces_nothing(calibration):
    assert _policies("gated", calibration=calibration, gate_tau=2.0) == [
        Gated(2.0, 1.5, 8, rate=0.1)
    ]


def test_gated_runs_every_calibrated_rate_unbudgeted_unless_swept(tmp_path):
    """A calibration of several rates: one `gated` (and `entropy`) per rate, its tau and
    lambda and its rate, unbudgeted; `rate=` picks one; `budget_sweep=true` runs the budgets;
    thresholds by hand (no calibration) still work, without a rate."""
    path = tmp_path / "rates.json"
    gated = (Gate(0.02, tau=3.0, lam=2.0), Gate(0.1, tau=1.0, lam=1.5))
    entropy = (Gate(0.02, tau=0.9, lam=2.5), Gate(0.1, tau=0.4, lam=1.2))
    gates = {"gated": gated, "entropy": entropy}
    Calibration((0.02, 0.1), window=8, gates=gates, n_tokens=10, source="t").to_json(path)
    policies = _policies("gated,entropy", calibration=path)
    assert policies == [
        Gated(3.0, 2.0, 8, rate=0.02),
        Gated(1.0, 1.5, 8, rate=0.1),
        EntropyGated(0.9, 2.5, 8, rate=0.02),
        EntropyGated(0.4, 1.2, 8, rate=0.1),
    ]
    assert not any(p.budgeted for p in policies)
    assert _policies("gated:rate=0.1", calibration=path) == [Gated(1.0, 1.5, 8, rate=0.1)]
    swept = _policies("gated:budget_sweep=true", calibration=path)
    assert [p.budgeted for p in swept] == [True, True]
    assert _policies("gated", gate_tau=1.0, gate_lam=2.0) == [Gated(1.0, 2.0)]
    with pytest.raises(DivscopeError, match="rate=0.05 is not a rate of --calibration"):
        _policies("gated:rate=0.05", calibration=path)
    with pytest.raises(DivscopeError, match="rate= picks a calibrated rate"):
        _policies("gated:rate=0.05", gate_tau=1.0, gate_lam=2.0)
    with pytest.raises(DivscopeError, match="appears twice"):
        _policies("gated,gated:budget_sweep=true", calibration=path)
    with pytest.raises(DivscopeError, match="budget_sweep='yes' is not true or false"):
        _policies("gated:budget_sweep=yes", calibration=path)


def test_a_flag_of_a_policy_that_is_not_calibrated_is_not_refused(calibration):
    assert _policies("rast", calibration=calibration, rast_lam=3.0) == [Rast(lam=3.0)]


@pytest.mark.parametrize(
    "text,kwargs,expected",
    [
        # rl-replace alone brings both controls at its own sampling.
        ("rl-replace", {}, [RLReplace(), Base(**REPLACED), RL(**REPLACED)]),
        ("base-greedy", {}, [BaseGreedy(), Base(**REPLACED), RL(**REPLACED)]),
        # listed controls run at the run's sampling and at rl-replace's.
        (
            "base,rl,forward,rl-replace,base-greedy",
            {"eps": 0.1},
            [Base(), Base(**REPLACED), RL(), RL(**REPLACED), Forward(eps=0.1), RLReplace(),
             BaseGreedy()],
        ),
        # at the run's own sampling the controls are the run's (no parameters).
        ("rl-replace", {"temperature": 0.6, "top_p": 0.95}, [RLReplace(), Base(), RL()]),
        ("base,rl,forward", {"eps": 0.1}, [Base(), RL(), Forward(eps=0.1)]),
    ],
)  # fmt: skip
def test_controls_run_at_every_sampling_of_the_run(text, kwargs, expected):
    assert _policies(text, **kwargs) == expected


@pytest.mark.parametrize(
    "text,kwargs,message",
    [
        ("base,rl,base", {}, "a policy appears twice"),
        ("forward", {}, "needs --eps"),
        ("forward", {"eps": (0.1, 0.1)}, r"Forward\(eps=0.1\) appears twice"),
        ("gated", {"gate_tau": 1.0}, "needs --gate-lam, or --calibration"),
        ("entropy", {"entropy_tau": 1.0, "entropy_lam": 1.0, "entropy_window": 0},
         "--entropy-window must be >= 1"),
        ("early", {"early_share": 1.5}, r"--early-share must be in \[0.0, 1.0\]"),
        ("base-greedy", {"replace_top_p": 0.0}, "--replace-top-p must be in"),
    ],
)  # fmt: skip
def test_parse_policies_errors(text, kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        _policies(text, **kwargs)


def test_stratify_and_maps_multiply_forward_and_reverse():
    policies = _policies(
        "base,forward,reverse", eps=(0.05, 0.1), stratify="none,tail,entropy-matched",
        match_tol=0.2, map_kind="online,retrospective", map_table="t1.parquet,t2.parquet",
    )  # fmt: skip
    forward = [p for p in policies if p.name == "forward"]
    assert len(forward) == len([p for p in policies if p.name == "reverse"]) == 2 * 3 * 3
    assert forward[:3] == [
        Forward(eps=0.05),
        Forward(eps=0.05, map_table="t1.parquet"),
        Forward(eps=0.05, map_table="t2.parquet"),
    ]
    assert Forward(eps=0.1, stratum="entropy-matched", match_tol=0.2) in forward
    assert policies[0] == Base()
    assert Forward(eps=0.05, stratum="tail", map_table="t2.parquet").params() == {
        "eps": 0.05, "stratum": "tail", "map_table": "t2.parquet", "map": "retrospective",
    }  # fmt: skip
    assert Reverse(eps=0.05).params() == {"eps": 0.05}  # today's settings, unchanged


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"stratify": "tails"}, "--stratify 'tails': expected comma-separated strata"),
        ({"stratify": "tail,tail"}, "a stratum appears twice"),
        ({"map_kind": "offline"}, "--map 'offline': expected online, retrospective"),
        ({"map_kind": "retrospective"}, "--map retrospective needs --map-table"),
        ({"map_table": "t.parquet"}, "--map-table needs --map retrospective"),
        ({"map_kind": "retrospective", "map_table": "t,t"}, "a table appears twice"),
        ({"stratify": "entropy-matched", "match_tol": -0.1}, "--match-tol must be >= 0"),
    ],
)
def test_stratify_and_map_errors(kwargs, message):
    with pytest.raises(DivscopeError, match=message):
        _policies("forward", eps=0.1, **kwargs)


def test_stratify_needs_forward_or_reverse():
    with pytest.raises(DivscopeError, match="apply to forward and reverse"):
        _policies("base,rl", stratify="tail")


def test_specs_split_at_commas_that_start_a_policy():
    assert parse_specs("base,rl-replace:temperature=0.7,top_p=0.9, forward:eps=0.1/0.2") == (
        "base", "rl-replace:temperature=0.7,top_p=0.9", "forward:eps=0.1/0.2",
    )  # fmt: skip
    assert parse_spec("forward:map_table=runs/rl.parquet,stratum=none/tail") == (
        "forward", {"map_table": ("runs/rl.parquet",), "stratum": ("none", "tail")},
    )  # fmt: skip


@pytest.mark.parametrize(
    "text,kwargs,expected",
    [
        ("forward:eps=0.01/0.1", {"eps": 0.5}, [Forward(eps=0.01), Forward(eps=0.1)]),
        ("forward:eps=0.1,stratum=tail", {}, [Forward(eps=0.1, stratum="tail")]),
        ("forward:eps=0.1,stratum=entropy-matched", {"match_tol": 0.3},
         [Forward(eps=0.1, stratum="entropy-matched", match_tol=0.3)]),
        ("reverse:eps=0.1,map_table=a/t.parquet", {}, [Reverse(eps=0.1, map_table="a/t.parquet")]),
        ("gated:tau=1.0,lam=2.0,window=4", {}, [Gated(1.0, 2.0, 4)]),
        ("rast:lam=0.5", {"rast_lam": 2.0}, [Rast(lam=0.5)]),
        ("early:share=0.25", {}, [Early(share=0.25)]),
        # a spec's own sampling brings its controls at it; a listed base runs at both
        ("base,rl-replace:temperature=0.7,top_p=0.9", {},
         [Base(), Base(temperature=0.7, top_p=0.9), RLReplace(temperature=0.7, top_p=0.9),
          RL(temperature=0.7, top_p=0.9)]),
        ("base:temperature=0.6", {}, [Base(temperature=0.6, top_p=0.7)]),
        # the keys of a spec are the options' only other home: the same policies
        ("forward:eps=0.05,random:rate=0.1", {}, _policies("forward,random", eps=0.05, rate=0.1)),
    ],
)  # fmt: skip
def test_spec_keys_over_the_options(text, kwargs, expected):
    assert _policies(text, **kwargs) == expected


def test_spec_calibration(calibration):
    assert _policies(f"gated:calibration={calibration}") == [Gated(2.0, 1.5, 8, rate=0.1)]
    with pytest.raises(DivscopeError, match="--gate-lam 1.0 replaces the value 1.5"):
        _policies(f"gated:calibration={calibration},lam=1.0")


def test_policy_objects_get_their_controls_too():
    assert Policies((RLReplace(), Forward(eps=0.1))).build(StatsConfig()) == _policies(
        "rl-replace,forward:eps=0.1"
    )


@pytest.mark.parametrize(
    "text,message",
    [
        ("forward:eps", "'eps' is not key=value"),
        ("forward:eps=0.1,eps=0.2", "the key 'eps' appears twice"),
        ("forward:epsilon=0.1", "unknown key 'epsilon'"),
        ("forward:eps=x", "eps='x' is not a number"),
        ("forward:eps=0.1,stratum=tails", "stratum 'tails' is unknown"),
        ("eps=0.1", "follows no policy name"),
        ("nope:eps=0.1", "unknown policy 'nope'"),
    ],
)
def test_spec_errors(text, message):
    with pytest.raises(DivscopeError, match=message):
        _policies(text)


def test_mixture_beside_rl_replace_samples_at_its_sampling():
    beside = Policies("base,rl,rl-replace,mixture", alpha=0.03).build(StatsConfig())
    mixture = [p for p in beside if p.name == "mixture"]
    assert [(p.temperature, p.top_p) for p in mixture] == [(REPLACE_TEMPERATURE, REPLACE_TOP_P)]
    alone = Policies("base,rl,mixture", alpha=0.03).build(StatsConfig())
    assert [p.params() for p in alone if p.name == "mixture"] == [{"alpha": 0.03}]
    own = Policies("rl-replace,mixture:temperature=1.0", alpha=0.03).build(StatsConfig())
    assert [p.params() for p in own if p.name == "mixture"] == [{"alpha": 0.03, "temperature": 1.0}]


def test_random_effective_needs_its_forward_in_the_run():
    built = Policies("forward,random-effective", eps=(0.05,)).build(StatsConfig())
    assert [p.params() for p in built] == [{"eps": 0.05}, {"eps": 0.05}]
    with pytest.raises(DivscopeError, match="add forward:eps=0.05 to --policy"):
        Policies("base,random-effective", eps=(0.05,)).build(StatsConfig())
    with pytest.raises(DivscopeError, match="forward at eps 0.05"):
        Policies("forward,random-effective", eps=(0.05,), stratify="tail").build(StatsConfig())
