// Chapter 19's rhyme checker (the package's `rhyme` module) for the poem page: the characters
// that close the even verses (the rhyme characters), whether they all fall in one of the thirteen
// rhyme classes (十三辙) and whether one closes two verses (重韵). The same rule as rhyme.py's
// rhyme_characters, rhymes and repeats_rhyme; the classes come from the poet's JSON file
// (tools/export_poet_playground.py writes chapter 19's table there, for the characters of the
// vocabulary). tests/test_playground_poet.py checks it against the Python checker.

// poet.py's VERSE: a verse is the characters up to and including a mark, or what is left at the
// end. The `u` flag: code points, as Python iterates a str.
const VERSE = /[^，。？]*[，。？]|[^，。？]+$/gu;
const MARKS = /[，。？]+$/u;

// {character: class name} from the JSON file's rhyme.classes ({class name: its characters}).
export function rhymeTable(rhyme) {
  const table = new Map();
  for (const [name, characters] of Object.entries(rhyme.classes)) {
    for (const character of characters) table.set(character, name);
  }
  return table;
}

// The rhyme characters of `poem`, each with its position (in code points) in the poem.
export function rhymeCharacters(poem) {
  const found = [];
  let at = 0;
  (poem.match(VERSE) ?? []).forEach((verse, index) => {
    const text = [...verse.replace(MARKS, "")];
    if (index % 2 === 1 && text.length) {
      found.push({ character: text.at(-1), at: at + text.length - 1 });
    }
    at += [...verse].length;
  });
  return found;
}

// The verdict on `poem` with `table` (rhymeTable): its rhyme characters and their classes (null:
// a character in no class), whether it rhymes (at least two even verses, all ending in one
// class) and the characters that close more than one even verse (重韵).
export function checkRhyme(table, poem) {
  const ends = rhymeCharacters(poem);
  const classes = ends.map(({ character }) => table.get(character) ?? null);
  const distinct = new Set(classes);
  const rhymes = ends.length >= 2 && distinct.size === 1 && !distinct.has(null);
  const seen = ends.map(({ character }) => character);
  const repeated = [...new Set(seen.filter((c, i) => seen.indexOf(c) !== i))];
  return { ends, classes, rhymes, repeats: repeated.length > 0, repeated };
}
