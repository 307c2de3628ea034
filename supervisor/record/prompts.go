package record

import (
	"shellagent/acp"
	"shellagent/protocol"
)

// PromptOnce serves a session/prompt with idempotencyKey key, which run
// runs, answering through the reply it is given: a key the session
// accepted already (from now on, or as Seed found it) is answered with
// its messageId, and a retry of a prompt not inserted yet is answered
// with its answer once it comes; the prompt runs at most once, and the
// key of one that was inserted is recorded, written before its answer
// goes (journal Store.Prompt). It is safe for concurrent
// use; reply and run are called with no lock held, reply at most once.
func (d *Recorder) PromptOnce(key string, run func(reply protocol.Reply), reply protocol.Reply) {
	d.mu.Lock()
	if id, ok := d.keys[key]; ok {
		d.mu.Unlock()
		reply(&acp.PromptResponse{MessageID: id}, nil)
		return
	}
	if waiting, ok := d.held[key]; ok {
		d.held[key] = append(waiting, reply)
		d.mu.Unlock()
		return
	}
	d.held[key] = nil
	d.mu.Unlock()
	run(func(result any, err error) {
		d.mu.Lock()
		waiting := d.held[key]
		delete(d.held, key)
		r, ok := result.(*acp.PromptResponse)
		ok = ok && err == nil
		if ok {
			d.keys[key] = r.MessageID
		}
		d.mu.Unlock()
		if ok && !d.off() {
			// On disk before the answer: a retry after a crash finds it.
			d.store.Prompt(d.id, key, r.MessageID)
		}
		reply(result, err)
		for _, w := range waiting {
			w(result, err)
		}
	})
}
