// The translator's English tokenizer (chapter 13), in plain JavaScript: NFKC, the pre-tokenizer's
// regular expression, byte-pair merges, the vocabulary. It mirrors src/transformer_book/subwords.py
// (pre_tokenize, word_symbols, BytePairEncoding.encode_word, SubwordVocabulary.encode) and
// Translator.source_ids (src/transformer_book/translation.py). tests/test_playground_translator.py
// checks that its token ids equal Python's on the 1,000 test sentences and on awkward inputs.

// Python's \w on a str is a letter, a number or "_" (str.isalnum() or "_"); its \s is
// str.isspace(), which has U+001C to U+001F and U+0085 where JavaScript's \s has U+FEFF. Both are
// written out here so that the two languages split text in the same places.
const WORD = "\\p{L}\\p{N}_";
const SPACE =
  "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
// a run of letters and digits, or a run of punctuation; spaces separate, and vanish
const PIECE = new RegExp(`[${WORD}]+|[^${WORD}${SPACE}]+`, "gu");

// "Tom's here." -> ["Tom", "'", "s", "here", "."]
export function preTokenize(sentence) {
  return sentence.match(PIECE) || [];
}

// "cat" -> ["c", "a", "t</w>"]: its characters (code points, as Python counts them), the last
// one marked as the end of the word.
export function wordSymbols(word, endOfWord) {
  const characters = [...word];
  const last = characters.pop();
  return [...characters, last + endOfWord];
}

// Replace every occurrence of the pair (left, right) by one symbol, left to right.
function mergePair(symbols, left, right) {
  const merged = [];
  for (let i = 0; i < symbols.length; ) {
    if (i + 1 < symbols.length && symbols[i] === left && symbols[i + 1] === right) {
      merged.push(left + right);
      i += 2;
    } else {
      merged.push(symbols[i]);
      i += 1;
    }
  }
  return merged;
}

// A tokenizer from the exported metadata: meta.tokenizer.merges ("left right", in the order
// learned) and meta.source_tokens (index = id).
export function fromMeta(meta) {
  const { merges, end_of_word: endOfWord, normalize } = meta.tokenizer;
  const rank = new Map(merges.map((pair, index) => [pair, index])); // "left right" -> rank
  const ids = new Map(meta.source_tokens.map((token, index) => [token, index]));
  const cache = new Map();

  // The lowest-ranked adjacent pair is merged first, until no pair is a merge (the first of
  // equal pairs wins, as Python's min does).
  function encodeWord(word) {
    if (cache.has(word)) return cache.get(word);
    let symbols = wordSymbols(word, endOfWord);
    while (symbols.length > 1) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < symbols.length; i++) {
        const r = rank.get(`${symbols[i]} ${symbols[i + 1]}`); // no symbol holds a space
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best === -1) break;
      symbols = mergePair(symbols, symbols[best], symbols[best + 1]);
    }
    cache.set(word, symbols);
    return symbols;
  }

  // "Tom's here." -> ["Tom</w>", "'</w>", "s</w>", "here</w>", ".</w>"]
  function tokenize(sentence) {
    return preTokenize(sentence.normalize(normalize)).flatMap(encodeWord);
  }

  // {ids, tokens, unknown} or {error}: the checks of Translator.source_ids, said for a reader.
  function encode(sentence) {
    const tokens = tokenize(sentence);
    const unkId = meta.unk_id;
    const idsOf = tokens.map((token) => (ids.has(token) ? ids.get(token) : unkId));
    const unknown = [...new Set(tokens.filter((token) => !ids.has(token)))].map((token) =>
      token.endsWith(endOfWord) ? token.slice(0, -endOfWord.length) : token,
    );
    if (idsOf.length === 0) return { error: "type an English sentence to translate" };
    if (idsOf.every((id) => id === unkId)) {
      const chinese = /\p{Script=Han}/u.test(sentence)
        ? " This box takes English; the model writes the Chinese."
        : "";
      return {
        error:
          `nothing to translate: the English vocabulary knows none of ` +
          `${unknown.map((piece) => JSON.stringify(piece)).join(", ")}.${chinese}`,
      };
    }
    if (idsOf.length > meta.max_source_len) {
      return {
        error:
          `too long: ${idsOf.length} tokens; the model reads at most ${meta.max_source_len} ` +
          "(its positional table): translate one sentence at a time",
      };
    }
    return { ids: idsOf, tokens, unknown };
  }

  return { tokenize, encode, encodeWord };
}
