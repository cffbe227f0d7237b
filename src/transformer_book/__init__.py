"""The Transformer, from scratch: the model code written in the book's chapters.

Every module except this one is generated from the chapter that explains it (tools/export_package.py);
read the chapter to see why the code is the way it is. This package holds model code only: it imports
torch and nothing from plotting or notebooks.
"""

from transformer_book.positional import Embeddings, PositionalEncoding, sinusoidal_table

__all__ = ["Embeddings", "PositionalEncoding", "sinusoidal_table"]
