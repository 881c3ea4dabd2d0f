// Header fields as RFC 5322 writes them (Name: value, continued on lines that start with white
// space), read from the parts mailparser leaves to us: the blocks of a message/delivery-status or
// message/feedback-report part, and the header section of a returned message. Every count and
// length is capped, so a hostile part costs bounded work.

/** One field as found: its name in lower case, its value unfolded (each fold one space) and trimmed. */
export interface Field {
  name: string;
  value: string;
}

/** Fields by lower-case name, each name's values in their order. */
export type Fields = Record<string, string[]>;

/** Fields read from one block at most; later ones are dropped. */
export const MAX_FIELDS = 200;
/** Characters of one value at most; the rest is cut. */
export const MAX_VALUE = 2_000;

const NAME = /^([!-9;-~]+)[ \t]*:(.*)$/;

/**
 * The blocks of fields in text, a block ending at an empty line (or one of white space only).
 * A line that is neither a field nor a continuation is skipped. At most maxBlocks blocks.
 */
export function fieldBlocks(text: string, maxBlocks: number): Field[][] {
  const blocks: Field[][] = [];
  let block: Field[] = [];
  const close = () => {
    if (block.length > 0) blocks.push(block);
    block = [];
  };
  let last: Field | undefined;
  for (const line of text.split(/\r?\n|\r/)) {
    if (line.trim() === "") {
      close();
      last = undefined;
      if (blocks.length >= maxBlocks) break;
      continue;
    }
    if (/^[ \t]/.test(line)) {
      if (last && last.value.length < MAX_VALUE) last.value = `${last.value} ${line.trim()}`.slice(0, MAX_VALUE);
      continue;
    }
    const m = NAME.exec(line);
    if (!m || block.length >= MAX_FIELDS) {
      last = undefined;
      continue;
    }
    last = { name: m[1]!.toLowerCase(), value: m[2]!.trim().slice(0, MAX_VALUE) };
    block.push(last);
  }
  if (blocks.length < maxBlocks) close();
  return blocks;
}

/** A block's fields by name. */
export function byName(block: Field[]): Fields {
  // No prototype: a field named __proto__ or constructor is a field like any other.
  const fields: Fields = Object.create(null);
  for (const f of block) {
    const values = fields[f.name] ?? [];
    values.push(f.value);
    fields[f.name] = values;
  }
  return fields;
}

/** The header section of a message (up to its first empty line), read from at most maxChars of it. */
export function headerSection(message: string, maxChars: number): Fields {
  const head = message.slice(0, maxChars);
  const end = /\r?\n[ \t]*\r?\n/.exec(head);
  return byName(fieldBlocks(end ? head.slice(0, end.index) : head, 1)[0] ?? []);
}

/** The first value of a field. */
export function first(fields: Fields, name: string): string | undefined {
  return fields[name]?.[0];
}

/**
 * A typed value as DSN and ARF fields write them ("rfc822; bob@example.com", "dns; mx.example",
 * "smtp; 550 ..."): the type in lower case and the rest. A value without a type has none.
 */
export function typedValue(value: string | undefined): { type?: string; value: string } | undefined {
  if (value === undefined) return undefined;
  const m = /^([A-Za-z0-9][\w.+-]*)[ \t]*;[ \t]*(.*)$/s.exec(value);
  return m ? { type: m[1]!.toLowerCase(), value: m[2]!.trim() } : { value: value.trim() };
}

/** An address as a field names it: the type and angle brackets taken off. */
export function addressIn(value: string | undefined): string | undefined {
  const v = typedValue(value)?.value;
  if (!v) return undefined;
  const inBrackets = /<([^<>]*)>/.exec(v);
  const address = (inBrackets ? inBrackets[1]! : v).trim();
  return address === "" ? undefined : address;
}

/** A Message-ID without its angle brackets ("<a@b>" → "a@b"). */
export function messageIdIn(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const m = /<([^<>\s]+)>/.exec(value);
  const id = (m ? m[1]! : value).trim();
  return id === "" || /\s/.test(id) ? undefined : id;
}
