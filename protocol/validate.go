package protocol

// The checks each request's params pass before an Agent sees them: required
// fields, reported as -32602 naming the first missing one.

func required(field, v string) error {
	if v == "" {
		return InvalidParams("%s: required", field)
	}
	return nil
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *InitializeRequest) validate() error {
	if p.ProtocolVersion == nil {
		return InvalidParams("protocolVersion: required")
	}
	return nil
}

func (p *NewSessionRequest) validate() error   { return required("cwd", p.Cwd) }
func (p *ListSessionsRequest) validate() error { return nil }
func (p *CloseSessionRequest) validate() error { return required("sessionId", p.SessionID) }

func (p *ResumeSessionRequest) validate() error {
	return first(required("sessionId", p.SessionID), required("cwd", p.Cwd))
}

func (p *PromptRequest) validate() error {
	if err := required("sessionId", p.SessionID); err != nil {
		return err
	}
	if len(p.Prompt) == 0 {
		return InvalidParams("prompt: must be a non-empty array of content blocks")
	}
	return nil
}

func (p *CancelTerminalRequest) validate() error {
	return first(required("sessionId", p.SessionID), required("terminalId", p.TerminalID))
}

func (p *CancelToolCallRequest) validate() error {
	return first(required("sessionId", p.SessionID), required("toolCallId", p.ToolCallID))
}

func (p *SetConfigOptionRequest) validate() error {
	return first(required("sessionId", p.SessionID), required("configId", p.ConfigID))
}
