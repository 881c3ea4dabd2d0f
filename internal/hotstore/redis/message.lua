-- Reads a message that is still in the hot store, as the records keep it (see readMessage).
-- KEYS[1] the message  ARGV[1] org id  ARGV[2] message id
return readMessage(ARGV[1], ARGV[2])
