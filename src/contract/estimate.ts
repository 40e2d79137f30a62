/**
 * Input tokens of a request body, estimated as ceil(bytes / 4). BPE
 * tokenizers average about 4 bytes of English per token and a JSON body
 * carries field names and punctuation on top of the prompt, so this is an
 * upper-ish estimate for English and cheap enough for the hot path. It only
 * picks the long-context class; exact tokenization of very large bodies is
 * left to a piscina job.
 */
export function estimateInputTokens(bodyBytes: number): number {
  return bodyBytes > 0 ? Math.ceil(bodyBytes / 4) : 0;
}
