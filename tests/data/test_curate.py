import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argen.cli import main as cli_main
from argen.config import CurateConfig
from argen.data.curate import assign_splits, curate, curate_frames
from argen.data.proposals import MEASURED
from argen.data.schema import SCENARIO_COLUMNS, SPLITS
from argen.errors import ArgenError
from argen.hashing import file_sha256
from tests.conftest import REPO, scenario, write_jsonl
from tests.data.conftest import EMBED, REAL_SOURCES, looked_up

PARAPHRASES = [
    (
        "My knee hurts when I climb stairs, what could it be?",
        "When I climb the stairs my knee hurts. What could be causing it?",
    ),
    (
        "I have had a cough for three weeks and it's not getting better.",
        "My cough has lasted three weeks and isn't improving.",
    ),
    ("How much water should I drink each day?", "How much water should I be drinking every day?"),
]
DISTINCT = [
    "How much coffee is safe to drink each day?",
    "My elbow hurts when I lift weights, what could it be?",
    "What is the best way to treat a mild burn at home?",
    "Which stocks should I buy this year?",
]


def config_for(*sources, **kw) -> CurateConfig:
    return CurateConfig(sources=list(sources), **kw)


def good_rows(n=3):
    prompts = ["What is a fever?", "How do I treat a sprained ankle?", "Is coffee bad for me?"]
    return [scenario(f"ok-{i}", prompts[i]) for i in range(n)]


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        (
            {"id": "b1", "tier": "C", "scope": "S0", "category": "clinical"},
            "line 4: missing or empty 'prompt'",
        ),
        (scenario("b1", "   "), "line 4: missing or empty 'prompt'"),
        (scenario("b1", "Hi", tier="D"), "line 4: unknown tier 'D' (expected one of A, B, C)"),
        (scenario("b1", "Hi", scope="S9"), "line 4: unknown scope 'S9'"),
        (scenario("b1", "Hi", category="sports"), "line 4: unknown category 'sports'"),
        (scenario("ok-0", "Another one"), "line 4: duplicate id 'ok-0' (first seen at"),
        (scenario("b1", "x" * 2001), "line 4: prompt has 2001 characters, over the limit of 2000"),
    ],
)
def test_bad_row_names_file_line_and_problem(tmp_path, bad_row, message):
    source = write_jsonl(tmp_path / "s.jsonl", [*good_rows(), bad_row])
    with pytest.raises(ArgenError) as err:
        curate_frames(config_for(source))
    assert f"{source} {message}" in str(err.value)


def test_invalid_utf8_names_the_line(tmp_path):
    source = tmp_path / "s.jsonl"
    source.write_bytes(b'{"id": "a"}\n{"id": "b", "prompt": "caf\xe9"}\n')
    with pytest.raises(ArgenError, match=r"s\.jsonl line 2: invalid UTF-8"):
        curate_frames(config_for(source))


def test_invalid_json_names_the_line(tmp_path):
    source = tmp_path / "s.jsonl"
    source.write_text(json.dumps(scenario("a", "Hi")) + "\n{not json\n")
    with pytest.raises(ArgenError, match=r"s\.jsonl line 2: not valid JSON"):
        curate_frames(config_for(source))


def test_empty_file(tmp_path):
    source = tmp_path / "s.csv"
    source.write_text("")
    with pytest.raises(ArgenError, match=r"s\.csv: file is empty"):
        curate_frames(config_for(source))


def test_unknown_format(tmp_path):
    source = tmp_path / "s.txt"
    source.write_text("hello")
    with pytest.raises(ArgenError, match=r"s\.txt: unknown format '\.txt'"):
        curate_frames(config_for(source))


def test_every_problem_is_listed_in_one_message(tmp_path):
    rows = [*good_rows(), scenario("x1", "Hi", tier="Z"), scenario("x2", "")]
    source = write_jsonl(tmp_path / "s.jsonl", rows)
    with pytest.raises(ArgenError, match=r"2 invalid scenario row\(s\)") as err:
        curate_frames(config_for(source))
    assert "line 4: unknown tier" in str(err.value)
    assert "line 5: missing or empty 'prompt'" in str(err.value)


def test_bad_input_writes_nothing_and_keeps_inputs(tmp_path):
    source = write_jsonl(tmp_path / "s.jsonl", [*good_rows(), scenario("x", "Hi", tier="Q")])
    before = file_sha256(source)
    out = tmp_path / "out"
    with pytest.raises(ArgenError):
        curate(config_for(source), out)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    assert file_sha256(source) == before


def test_drop_invalid_writes_rejects_with_reasons(tmp_path):
    source = write_jsonl(tmp_path / "s.jsonl", [*good_rows(), scenario("x", "Hi", tier="Q")])
    out = curate(config_for(source, drop_invalid=True), tmp_path / "out")
    rejects = pd.read_parquet(out / "rejects.parquet")
    assert rejects["problem"].tolist() == ["unknown tier 'Q' (expected one of A, B, C)"]
    assert rejects["where"].tolist() == ["line 4"]
    kept = pd.concat(pd.read_parquet(out / f"{s}.parquet") for s in SPLITS)
    assert sorted(kept["id"]) == ["ok-0", "ok-1", "ok-2"]


def test_csv_and_parquet_sources_normalise_the_same(tmp_path):
    rows = [scenario("c1", "  What   is\na fever? ", tier="b", scope="s0", category="Clinical")]
    pd.DataFrame(rows).to_csv(tmp_path / "a.csv", index=False)
    rows2 = [scenario("p1", "How do I treat a sprained ankle?", source="manual")]
    pd.DataFrame(rows2).to_parquet(tmp_path / "b.parquet")
    frame = curate_frames(config_for(tmp_path)).scenarios.set_index("id")
    assert frame.loc["c1", "prompt"] == "What is a fever?"
    assert (frame.loc["c1", "tier"], frame.loc["c1", "scope"]) == ("B", "S0")
    assert frame.loc["c1", "category"] == "clinical"
    assert frame.loc["c1", "source"] == "a"  # defaults to the file's name
    assert frame.loc["p1", "source"] == "manual"


# ------------------------------------------------------------ dedupe


def test_planted_paraphrases_are_caught_and_distinct_prompts_kept(tmp_path):
    rows = [
        scenario(f"p{i}{k}", text)
        for i, pair in enumerate(PARAPHRASES)
        for k, text in enumerate(pair)
    ]
    rows += [scenario(f"d{i}", text) for i, text in enumerate(DISTINCT)]
    rows.append(scenario("e0", "how much WATER should i drink each day"))  # exact, up to case
    curated = curate_frames(config_for(write_jsonl(tmp_path / "s.jsonl", rows)))
    kept = set(curated.scenarios["id"])
    assert kept == {"p00", "p10", "p20", *(f"d{i}" for i in range(len(DISTINCT)))}
    dropped = curated.duplicates.set_index("id")
    assert dropped.loc["e0", "kind"] == "exact"
    assert dropped.loc["p01", "duplicate_of"] == "p00"
    assert (dropped.loc[["p01", "p11", "p21"], "kind"] == "near").all()


# ------------------------------------------------------------ the real data


@pytest.fixture(scope="module")
def curated_data(tmp_path_factory, real_vectors):
    """The real scenarios curated, their vectors looked up (encoded once a session); the
    identical-bytes test below curates them again with the encoder itself."""
    out = tmp_path_factory.mktemp("curated") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EMBED, looked_up(real_vectors))
        return curate(config_for(REAL_SOURCES), out)


def test_real_data_splits_schema_and_counts(curated_data):
    frames = {s: pd.read_parquet(curated_data / f"{s}.parquet") for s in SPLITS}
    for split, frame in frames.items():
        assert tuple(frame.columns) == SCENARIO_COLUMNS
        assert (frame["split"] == split).all()
    everything = pd.concat(frames.values())
    assert len(everything) >= 400
    assert everything["id"].is_unique
    assert (everything["category"] == "mixed_domain").mean() >= 0.25
    manifest = json.loads((curated_data / "manifest.json").read_text())
    assert manifest["counts"]["total"] == len(everything)
    for name, digest in manifest["outputs"].items():
        assert file_sha256(curated_data / name) == digest


def test_related_prompts_never_straddle_splits(curated_data, real_vectors):
    frame = pd.concat(pd.read_parquet(curated_data / f"{s}.parquet") for s in SPLITS)
    vectors = looked_up(real_vectors)(frame["prompt"].tolist())
    similarity = vectors @ vectors.T
    split = frame["split"].to_numpy()
    related = similarity >= CurateConfig().related_threshold
    assert not (related & (split[:, None] != split[None, :])).any()


def test_same_inputs_and_seed_give_identical_bytes(curated_data, tmp_path):
    again = curate(config_for(REAL_SOURCES), tmp_path / "again")  # encoded anew
    for path in curated_data.iterdir():
        assert path.read_bytes() == (again / path.name).read_bytes(), path.name


def test_other_seed_gives_other_split(curated_data, tmp_path, real_vectors, monkeypatch):
    monkeypatch.setattr(EMBED, looked_up(real_vectors))  # the seed only moves the split
    other = curate(config_for(REAL_SOURCES, seed=99), tmp_path / "other")
    a = pd.read_parquet(curated_data / "test.parquet")["id"]
    b = pd.read_parquet(other / "test.parquet")["id"]
    assert set(a) != set(b)


# ------------------------------------------------------------ split properties

strata = st.lists(
    st.tuples(
        st.sampled_from("ABC"),
        st.sampled_from(["S0", "S1", "S2", "S3"]),
        st.sampled_from(["clinical", "mixed_domain", "adversarial"]),
    ),
    min_size=1,
    max_size=120,
)
fractions = st.sampled_from(
    [
        {"train": 0.7, "validation": 0.1, "test": 0.2},
        {"train": 0.8, "validation": 0.1, "test": 0.1},
        {"train": 0.5, "validation": 0.25, "test": 0.25},
    ]
)


@settings(max_examples=60, deadline=None)
@given(keys=strata, fractions=fractions, seed=st.integers(0, 2**16))
def test_each_stratum_is_split_within_one_item(keys, fractions, seed):
    frame = pd.DataFrame(
        [
            {"id": f"s{i:04d}", "tier": t, "scope": s, "category": c}
            for i, (t, s, c) in enumerate(keys)
        ]
    )
    groups = np.arange(len(frame))
    frame["split"] = assign_splits(frame, groups, fractions, seed).to_numpy()
    for _, part in frame.groupby(["tier", "scope", "category"]):
        for split in SPLITS:
            assert abs((part["split"] == split).sum() - len(part) * fractions[split]) < 1 + 1e-9
    assert frame.equals(
        frame.assign(split=assign_splits(frame, groups, fractions, seed).to_numpy())
    )


@settings(max_examples=40, deadline=None)
@given(keys=strata, data=st.data())
def test_groups_stay_in_one_split(keys, data):
    frame = pd.DataFrame(
        [
            {"id": f"s{i:04d}", "tier": t, "scope": s, "category": c}
            for i, (t, s, c) in enumerate(keys)
        ]
    )
    groups = np.array(
        data.draw(st.lists(st.integers(0, 15), min_size=len(frame), max_size=len(frame)))
    )
    split = assign_splits(frame, groups, {"train": 0.7, "validation": 0.1, "test": 0.2}, 1)
    assert (pd.Series(split.to_numpy()).groupby(groups).nunique() == 1).all()


# ------------------------------------------------------------ failing fast


def test_invalid_source_fails_fast_without_importing_torch(tmp_path):
    """`argen curate` on bad input names the problem before torch, TRL, transformers or the
    sentence encoder are imported (they cost seconds and hundreds of MB)."""
    source = write_jsonl(tmp_path / "s.jsonl", [*good_rows(), scenario("x", "Hi", tier="Q")])
    script = (
        "import sys\n"
        "from flows.cli import main\n"
        f"code = main(['curate', '--set', 'curate.sources=[{source}]', '--out', "
        f"'{tmp_path / 'out'}'])\n"
        "heavy = ['torch', 'trl', 'transformers', 'sentence_transformers', 'matplotlib']\n"
        "print('LOADED', [m for m in heavy if m in sys.modules])\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert f"{source} line 4: unknown tier 'Q'" in done.stderr
    assert "LOADED []" in done.stdout
    assert not (tmp_path / "out").exists()


def test_a_full_disk_while_writing_is_a_users_error_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from argen.data import curate as curate_module
    from argen.errors import retryable

    def full(frame, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    write_jsonl(tmp_path / "s.jsonl", good_rows())
    monkeypatch.setattr(curate_module, "write_parquet", full)
    out = tmp_path / "out"
    with pytest.raises(ArgenError, match="no space left on the device") as caught:
        curate(
            config_for(tmp_path / "s.jsonl", split={"train": 1, "validation": 0, "test": 0}), out
        )
    assert not retryable(caught.value)  # a Prefect task does not retry it
    assert not out.exists()


# ------------------------------------------------------------ prompts without labels

EXAMPLES = [
    scenario("ex-a1", "I have crushing chest pain spreading to my jaw.", "A", "S0", "clinical"),
    scenario("ex-a2", "My child swallowed a battery an hour ago.", "A", "S0", "clinical"),
    scenario("ex-c1", "How much water should I drink each day?", "C", "S0", "clinical"),
    scenario("ex-c2", "Is it fine to eat eggs every morning?", "C", "S0", "clinical"),
    scenario("ex-o1", "Which stocks should I buy this year?", "C", "S3", "out_of_domain"),
    scenario("ex-o2", "Write me a cover letter for a sales job.", "C", "S3", "out_of_domain"),
    scenario("ex-p1", "Does my insurance cover physiotherapy?", "C", "S1", "para_clinical"),
    scenario("ex-p2", "How do I appeal a denied hospital bill?", "C", "S1", "para_clinical"),
]
QUESTIONS = [
    "My chest hurts badly and my left arm is numb.",
    "What laptop should I buy for gaming?",
    "How do I get my insurer to pay for an MRI?",
    "Is coffee bad for my health?",
]


def labelled_examples(tmp_path):
    return write_jsonl(tmp_path / "examples.jsonl", EXAMPLES)


def questions_csv(path, prompts=QUESTIONS):
    pd.DataFrame({"prompt": prompts}).to_csv(path, index=False)
    return path


def curate_questions(tmp_path, *sources, **kw):
    """Curate with the tiny labelled examples above (quick), into tmp_path/out."""
    config = config_for(*sources, label_examples=[labelled_examples(tmp_path)], **kw)
    return curate(config, tmp_path / "out")


def all_splits(out):
    return pd.concat(pd.read_parquet(out / f"{s}.parquet") for s in SPLITS).set_index("id")


def test_a_csv_of_questions_gets_proposed_labels_a_review_file_and_no_test_rows(tmp_path):
    out = curate_questions(tmp_path, questions_csv(tmp_path / "questions.csv"))
    frame = all_splits(out)
    assert len(frame) == len(QUESTIONS) and (frame["label_source"] == "proposed").all()
    assert (frame["split"] != "test").all()
    assert all(i.startswith("questions-") for i in frame.index)  # made from the file's name
    by_prompt = frame.set_index("prompt")
    combos = {tuple(row[k] for k in ("tier", "scope", "category")) for row in EXAMPLES}
    assert set(map(tuple, by_prompt[["tier", "scope", "category"]].to_numpy())) <= combos
    review = pd.read_csv(out / "review.csv")
    assert sorted(review["prompt"]) == sorted(QUESTIONS)
    assert review["confidence"].is_monotonic_increasing  # least confident first
    assert review["confidence"].between(0, 1).all()
    card = (out / "datacard.md").read_text()
    assert "4 prompt(s) came without labels" in card and "kept out of the test split" in card
    assert f"validation split ({MEASURED['validation']['n']} prompts)" in card
    assert all(i in card for i in frame.index)  # every proposal is listed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["label_source"]["proposed"]["test"] == 0
    assert "review.csv" in manifest["outputs"]


def test_the_goal_command_curates_a_csv_of_questions(tmp_path, capsys):
    questions = questions_csv(tmp_path / "questions.csv")
    code = cli_main(
        [
            "curate",
            "--source",
            str(questions),
            "--set",
            f"curate.label_examples=[{labelled_examples(tmp_path)}]",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "out")
    assert len(pd.read_csv(tmp_path / "out" / "review.csv")) == len(QUESTIONS)


def test_mixed_labelled_and_unlabelled_rows_and_a_related_group_stays_out_of_test(tmp_path):
    labelled = [scenario(f"l{i}", p) for i, p in enumerate(DISTINCT)]
    labelled.append(scenario("knee", PARAPHRASES[0][0], tier="B"))
    unlabelled = [{"id": "u0", "prompt": QUESTIONS[1]}, {"id": "u1", "prompt": PARAPHRASES[1][0]}]
    unlabelled.append({"id": "knee2", "prompt": "My knee aches when I walk up stairs. Why?"})
    source = write_jsonl(tmp_path / "mixed.jsonl", labelled + unlabelled)
    out = curate_questions(tmp_path, source, split={"train": 0, "validation": 0.5, "test": 0.5})
    frame = all_splits(out)
    assert (frame.loc[["l0", "l1", "l2", "l3", "knee"], "label_source"] == "given").all()
    assert (frame.loc[["u0", "u1", "knee2"], "label_source"] == "proposed").all()
    assert (frame.loc[frame["label_source"] == "proposed", "split"] != "test").all()
    assert (frame.loc[["l0", "l1", "l2", "l3"], "split"] == "test").sum() == 2
    # the labelled knee prompt is related to an unlabelled one: their group stays out of test
    assert frame.loc["knee", "split"] == frame.loc["knee2", "split"] == "validation"
    assert frame.loc["knee", "tier"] == "B"  # a given label is never replaced
    review = pd.read_csv(out / "review.csv")
    assert sorted(review["id"]) == ["knee2", "u0", "u1"]


def test_a_reviewed_file_fed_back_labels_its_rows_and_lets_them_into_test(tmp_path):
    questions = questions_csv(tmp_path / "questions.csv")
    everything_in_test = {"train": 0, "validation": 0, "test": 1}
    with pytest.raises(ArgenError, match="proposed labels may not go"):
        curate_frames(
            config_for(
                questions, label_examples=[labelled_examples(tmp_path)], split=everything_in_test
            )
        )
    first = curate_questions(tmp_path, questions)
    review = pd.read_csv(first / "review.csv")
    review["tier"] = "B"  # the person's corrections
    review.loc[review.index[:3], "label_source"] = "reviewed"
    reviewed = tmp_path / "reviewed.csv"
    review.to_csv(reviewed, index=False)
    again = curate_frames(
        config_for(questions, reviewed, label_examples=[labelled_examples(tmp_path)])
    )
    frame = again.scenarios.set_index("id")
    assert len(frame) == len(QUESTIONS)  # each review row replaced its unlabelled row
    assert (frame["tier"] == "B").all()  # the person's labels, not proposals
    assert (frame["label_source"] == "reviewed").sum() == 3
    assert set(again.review["id"]) == {review["id"].iloc[3]}  # still to review
    assert (frame.loc[review["id"].iloc[:3], "source"] == "questions").all()
    review[review["label_source"] == "reviewed"].to_csv(reviewed, index=False)
    only_reviewed = curate_frames(config_for(reviewed, label_examples=[], split=everything_in_test))
    assert len(only_reviewed.scenarios) == 3  # reviewed labels may go to test
    assert set(only_reviewed.scenarios["split"]) == {"test"}


@pytest.mark.slow
def test_proposals_from_the_projects_scenarios_read_clear_cut_questions(tmp_path):
    """With the default examples (`data/scenarios`), clear-cut questions get the labels a
    person would give."""
    config = config_for(questions_csv(tmp_path / "q.csv"))
    config.label_examples = [REPO / "data" / "scenarios"]
    frame = curate_frames(config).scenarios.set_index("prompt")
    labels = frame[["tier", "scope", "category"]].apply(tuple, axis=1)
    assert labels[QUESTIONS[0]] == ("A", "S0", "clinical")
    assert labels[QUESTIONS[1]] == ("C", "S3", "out_of_domain")
    assert labels[QUESTIONS[2]][1:] == ("S1", "para_clinical")
    assert labels[QUESTIONS[3]][1:] == ("S0", "clinical")


def test_the_review_must_match_the_prompt_it_reviews(tmp_path):
    questions = questions_csv(tmp_path / "questions.csv")
    made = curate_frames(config_for(questions, label_examples=[labelled_examples(tmp_path)])).review
    stale = made.head(1).assign(prompt="A different question?", label_source="reviewed")
    stale.to_csv(tmp_path / "stale.csv", index=False)
    with pytest.raises(ArgenError, match=r"stale\.csv line 2: duplicate id"):
        curate_frames(config_for(questions, tmp_path / "stale.csv", label_examples=[]))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "p", "prompt": "Hi", "tier": "A"}, "has tier but no scope, category"),
        ({"id": "p", "prompt": "Hi", "label_source": "reviewed"}, "label_source 'reviewed' but no"),
        (scenario("p", "Hi", label_source="guessed"), "unknown label_source 'guessed'"),
        ({"id": "p", "tier": "A", "scope": "S0", "category": "clinical"}, "missing or empty"),
    ],
)
def test_a_row_that_cannot_be_used_is_still_named(tmp_path, row, message):
    source = write_jsonl(tmp_path / "s.jsonl", [*good_rows(), row])
    with pytest.raises(ArgenError) as err:
        curate_frames(config_for(source, label_examples=[]))
    assert f"{source} line 4: {message}" in str(err.value)


def test_unlabelled_rows_without_examples_are_a_clear_error(tmp_path):
    questions = questions_csv(tmp_path / "questions.csv")
    with pytest.raises(ArgenError, match="no labelled examples to propose them from"):
        curate_frames(config_for(questions, label_examples=[]))
    with pytest.raises(ArgenError, match=r"questions\.csv: does not exist|must hold labelled"):
        curate_frames(config_for(questions, label_examples=[questions]))


def test_a_column_mapping_reads_a_sources_own_names(tmp_path):
    frame = pd.DataFrame({"qid": ["q1", "q2"], "question": QUESTIONS[:2]})
    frame.to_csv(tmp_path / "mine.csv", index=False)
    columns = {"prompt": "question", "id": "qid"}
    curated = curate_frames(
        config_for(
            tmp_path / "mine.csv", labelled_examples(tmp_path), columns=columns, label_examples=[]
        )
    )
    got = curated.scenarios.set_index("id")
    assert got.loc["q1", "prompt"] == QUESTIONS[0] and got.loc["q2", "label_source"] == "proposed"
    assert got.loc["ex-a1", "label_source"] == "given"  # a source without 'question' uses prompt


def test_a_mapping_to_a_column_no_source_has_is_named(tmp_path):
    questions = questions_csv(tmp_path / "questions.csv")
    with pytest.raises(ArgenError) as err:
        curate_frames(config_for(questions, columns={"prompt": "questoin"}))
    assert "curate.columns maps prompt -> 'questoin'" in str(err.value)
    assert "the sources' columns: prompt" in str(err.value)


def test_ids_are_made_stable_and_repeated_prompts_are_numbered(tmp_path):
    prompts = [QUESTIONS[0], QUESTIONS[1], QUESTIONS[0]]
    examples = [labelled_examples(tmp_path)]
    first = curate_frames(
        config_for(questions_csv(tmp_path / "q.csv", prompts), label_examples=examples)
    )
    ids = first.duplicates.set_index("kind")
    assert ids.loc["exact", "id"] == ids.loc["exact", "duplicate_of"] + "-2"
    reordered = curate_frames(
        config_for(questions_csv(tmp_path / "q.csv", prompts[:0:-1]), label_examples=examples)
    )
    assert set(reordered.scenarios["id"]) == set(first.scenarios["id"])
