"""The code version keys every stage: library edits change it, recipes do not."""

from argen.version import source_digest


def test_library_edits_change_the_digest_and_recipes_do_not(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (tmp_path / "stage.py").write_text("x = 1\n")
    (tmp_path / "models.yaml").write_text("a: 1\n")
    (recipes / "gpu.yaml").write_text("train: {max_steps: 2}\n")
    first = source_digest(tmp_path, recipes)
    (recipes / "new.yaml").write_text("extends: gpu\n")  # added while a pipeline runs
    (recipes / "gpu.yaml").write_text("train: {max_steps: 3}\n")
    assert source_digest(tmp_path, recipes) == first
    (tmp_path / "models.yaml").write_text("a: 2\n")
    second = source_digest(tmp_path, recipes)
    assert second != first
    (tmp_path / "stage.py").write_text("x = 2\n")
    assert source_digest(tmp_path, recipes) not in (first, second)
