"""Exercise checkers for the book's chapters: one module per chapter (ch01, ch02, ...).

    from book_exercises import check
    check(layer_norm, device=device)

``check`` finds the exercise named like the reader's function (chapter 4's ``layer_norm`` here), runs
the function on small seeded inputs, compares it with the companion package (transformer_book) and
prints one line: "Not attempted yet: ...", "Correct: ..." or "Not quite: <hint>". A chapter module
defines its exercises only (cases, reference, typical mistakes with their hints); each stub and
solution is written once, in its chapter's notebook.
"""

from book_exercises.core import CHAPTERS, check

__all__ = ["CHAPTERS", "check"]
