/** A field of a request that is refused: named, with what is wrong with it. The API answers it 422, naming the field. */
export class InvalidField extends Error {
  constructor(
    readonly field: string,
    /** What is wrong with the field, without its name. */
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
  }
}
