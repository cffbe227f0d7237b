"""Exercise checkers for the book's chapters: one module per chapter (ch01, ch02, ...).

    from book_exercises.ch04 import check_layer_norm
    check_layer_norm(my_layer_norm)

Each checker runs the reader's function on small seeded inputs, compares it with the companion
package (transformer_book) and prints one line: "Not attempted yet: ...", "Correct: ..." or
"Not quite: <hint>". Each chapter module also holds STUBS and SOLUTIONS (source text), CHECKERS,
and a conceptual QUESTION with its ANSWER.
"""

from pathlib import Path

# every chXX.py beside this file, in order
CHAPTERS = tuple(sorted(path.stem for path in Path(__file__).parent.glob("ch[0-9][0-9].py")))
