"""The class's store: the room's answers counted once per learner and final at the reveal, challenges and their
leaderboards, all kept on disk (a reload and a restart find them), and safe under many sessions at once."""

import sqlite3
import threading

import pytest

from specviz.classroom.challenge import Choice, Result
from specviz.classroom.store import ClassStore
from specviz.errors import SpecVizError

OPTIONS = ("0", "1", "2", "3")


def result(choice: Choice, speedup: float = 1.2, identical: bool = True, at: float = 0.0) -> Result:
    return Result(choice, speedup, speedup - 0.1, speedup + 0.1, 3, f"{speedup:.2f}× (…)", 1.8, 0.5, identical,
                  1.0 if identical else 0.8, 1.0 if identical else 0.9, 16, at)


@pytest.fixture
def store(tmp_path):
    s = ClassStore(tmp_path / "room.sqlite3")
    yield s
    s.close()


def test_each_learner_counts_once_and_may_change_until_the_reveal(store):
    assert store.answer("q", "ann", "1") and store.answer("q", "bob", "2") and store.answer("q", "cy", "2")
    assert store.tally("q", OPTIONS).counts == (0, 1, 2, 0)
    assert store.answer("q", "bob", "1")  # bob changes his mind: still one answer of his
    assert store.tally("q", OPTIONS).counts == (0, 2, 1, 0) and store.answer_of("q", "bob") == "1"
    store.reveal("q")
    assert not store.answer("q", "bob", "3") and not store.answer("q", "dee", "0")  # final at the reveal
    tally = store.tally("q", OPTIONS)
    assert tally.counts == (0, 2, 1, 0) and tally.revealed
    assert store.tally("other", OPTIONS).total == 0  # questions are apart


def test_a_reset_asks_the_question_afresh(store):
    store.answer("q", "ann", "1")
    store.answer("p", "ann", "0")
    store.reveal("q")
    store.reset("q")
    assert store.tally("q", OPTIONS).total == 0 and not store.revealed("q")
    assert store.answer("q", "ann", "2")  # open again
    assert store.tally("p", OPTIONS).total == 1  # the other question keeps its answers
    store.reset()
    assert store.tally("p", OPTIONS).total == 0


def test_a_restart_keeps_answers_reveals_and_the_leaderboard(tmp_path):
    path = tmp_path / "room.sqlite3"
    first = ClassStore(path)
    first.answer("q", "ann", "1")
    first.reveal("q")
    challenge = first.open_challenge("Count to ten.", 16)
    first.enter(challenge.id, "ann", result(Choice("ngram")))
    first.close()
    again = ClassStore(path)
    assert again.answer_of("q", "ann") == "1" and again.revealed("q")
    assert again.challenge() == challenge
    rows = again.leaderboard(challenge.id, "ann")
    assert [(r.result.choice, r.entries, r.yours) for r in rows] == [(Choice("ngram"), 1, True)]
    assert again.last_choice(challenge.id, "ann") == Choice("ngram")
    again.close()


def test_a_damaged_file_is_kept_aside_and_a_fresh_store_starts(tmp_path):
    path = tmp_path / "room.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    store = ClassStore(path)
    assert store.tally("q", OPTIONS).total == 0
    assert [p.name for p in tmp_path.iterdir() if ".damaged-" in p.name]
    store.close()


def test_a_challenge_ranks_its_entries_and_identical_entries_share_one_result(store):
    challenge = store.open_challenge("Count to ten.", 16)
    slow, fast, lossy = Choice("ngram", 2), Choice("suffix", 4), Choice("ngram", 4, rule="relaxed τ=2")
    store.enter(challenge.id, "ann", result(slow, 1.1, at=1))
    store.enter(challenge.id, "bob", result(fast, 1.5, at=2))
    kept = store.enter(challenge.id, "cy", result(fast, 1.3, at=3))  # the same choice, measured again: one figure
    assert kept.speedup == 1.5
    store.enter(challenge.id, "dee", result(lossy, 1.7, identical=False, at=4))
    rows = store.leaderboard(challenge.id, "cy")
    assert [(r.rank, r.result.choice, r.entries, r.yours) for r in rows] == [
        (1, lossy, 1, False), (2, fast, 2, True), (3, slow, 1, False)]
    assert rows[0].lossy and rows[0].rank_text() == "1 ⚠ lossy" and not rows[1].lossy
    assert store.result(challenge.id, fast).speedup == 1.5 and store.result(challenge.id, Choice("auto")) is None


def test_a_closed_challenge_refuses_entries_and_a_new_one_closes_the_old(store):
    first = store.open_challenge("Count to ten.", 16)
    second = store.open_challenge("Name three rivers.", 32)
    assert store.challenge() == second and second.open
    assert store.enter(first.id, "ann", result(Choice("ngram"))) is None  # the first closed as the second opened
    store.close_challenge(second.id)
    assert not store.challenge().open
    assert store.enter(second.id, "ann", result(Choice("ngram"))) is None
    assert store.leaderboard(second.id) == []


@pytest.mark.parametrize("prompt, tokens, message", [
    ("", 16, "needs a prompt"), ("   \n", 16, "needs a prompt"), ("x" * 2001, 16, "2,001 characters"),
    ("Count to ten.", 17, "not 17")])
def test_a_challenge_refuses_a_bad_prompt_or_length(store, prompt, tokens, message):
    with pytest.raises(SpecVizError, match=message):
        store.open_challenge(prompt, tokens)
    assert store.challenge() is None


def test_many_sessions_at_once_are_all_counted(store):
    """Thirty learners answer at the same moment, and thirty enter a challenge: every one is counted."""
    challenge = store.open_challenge("Count to ten.", 16)
    start = threading.Barrier(60)
    errors = []

    def learner(i: int) -> None:
        try:
            start.wait()
            if i < 30:
                store.answer("q", f"learner-{i}", OPTIONS[i % 4])
                store.tally("q", OPTIONS)
            else:
                store.enter(challenge.id, f"learner-{i}", result(Choice("ngram", 1 + i % 6)))
                store.leaderboard(challenge.id)
        except (sqlite3.Error, SpecVizError) as exc:  # what a lost race would raise
            errors.append(exc)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.tally("q", OPTIONS).counts == (8, 8, 7, 7)
    rows = store.leaderboard(challenge.id)
    assert len(rows) == 6 and sum(r.entries for r in rows) == 30


def test_the_board_counts_how_often_each_choice_was_timed(store):
    """Identical entries served one measurement leave it at one; a fresh timing of the same choice adds one."""
    challenge = store.open_challenge("Count to ten.", 16)
    choice = Choice("suffix", 4)
    store.enter(challenge.id, "ann", result(choice, 1.4))
    store.enter(challenge.id, "bob", result(choice, 1.4), measured=False)  # served ann's measurement
    (row,) = store.leaderboard(challenge.id)
    assert (row.entries, row.measurements) == (2, 1)
    store.enter(challenge.id, "cy", result(choice, 1.2))  # timed again (say, after a lost race): counted, not shown
    (row,) = store.leaderboard(challenge.id)
    assert (row.entries, row.measurements, row.result.speedup) == (3, 2, 1.4)


def test_a_served_entry_that_lands_first_does_not_count_as_a_timing(store):
    """Two identical presses: the session that was served the run may enter before the one that measured it."""
    challenge = store.open_challenge("Count to ten.", 16)
    choice = Choice("ngram", 2)
    store.enter(challenge.id, "bob", result(choice, 1.3), measured=False)  # served, and quicker to write
    store.enter(challenge.id, "ann", result(choice, 1.3))  # the one that timed it
    (row,) = store.leaderboard(challenge.id)
    assert (row.entries, row.measurements) == (2, 1)
    other = store.open_challenge("Count to five.", 16)
    store.enter(other.id, "cy", result(choice, 1.3), measured=False)  # served a run measured on another page
    (row,) = store.leaderboard(other.id)
    assert (row.entries, row.measurements) == (1, 1)


def test_the_headline_never_rewards_a_lossy_entry_without_saying_so_and_the_csv_has_no_names(store):
    from specviz.classroom.challenge import CSV_COLUMNS, csv_text, headline

    challenge = store.open_challenge("Count to ten.", 16)
    exact, lossy = Choice("ngram", 4), Choice("ngram", 4, rule="relaxed τ=2")
    store.enter(challenge.id, "ann", result(exact, 1.3, at=1))
    store.enter(challenge.id, "bob", result(lossy, 1.6, identical=False, at=2))
    rows = store.leaderboard(challenge.id)
    text = headline(rows)
    assert "Fastest lossless entry: **ngram · γ=4 · exact**" in text
    assert "is lossy: 80% of tokens agree · ROUGE-L 0.90" in text
    lines = csv_text(rows).splitlines()
    assert lines[0].split(",") == list(CSV_COLUMNS) and len(lines) == 3
    assert lines[1].startswith("1,True,ngram,4,0,relaxed τ=2,1.6000") and "ann" not in "".join(lines)


def test_a_choice_refuses_what_the_room_does_not_offer():
    offered = ["ngram", "suffix"]
    Choice("suffix", 4, 8, "relaxed τ=1").check(offered)
    for bad, message in ((Choice("gpt-5"), "unknown drafter 'gpt-5'"), (Choice("ngram", 0), "γ must be"),
                         (Choice("ngram", 4, 99), "tree budget"), (Choice("ngram", rule="loose"), "unknown verif")):
        with pytest.raises(SpecVizError, match=message):
            bad.check(offered)
