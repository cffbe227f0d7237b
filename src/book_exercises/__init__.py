"""Exercise checkers for the book's chapters: one module per chapter (ch01 ... ch12).

    from book_exercises.ch04 import check_layer_norm
    check_layer_norm(my_layer_norm)

Each checker runs the reader's function on small seeded inputs, compares it with the companion
package (transformer_book) and prints one line: "Not attempted yet: ...", "Correct: ..." or
"Not quite: <hint>". Each chapter module also holds STUBS and SOLUTIONS (source text), CHECKERS,
and a conceptual QUESTION with its ANSWER.
"""

CHAPTERS = tuple(f"ch{number:02d}" for number in range(1, 13))
