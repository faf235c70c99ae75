package wire

import (
	"encoding/binary"
	"fmt"
)

// cursor skips over fields of an encoded message to find offsets. It never
// builds messages; an error sticks, so a walk checks once at the end.
type cursor struct {
	p    []byte
	off  int
	flex bool
	err  error
}

func (c *cursor) fail(what string) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: truncated at %s (offset %d of %d)", ErrMalformed, what, c.off, len(c.p))
	}
	c.off = len(c.p)
}

func (c *cursor) skip(n int, what string) {
	if n < 0 || n > len(c.p)-c.off {
		c.fail(what)
		return
	}
	c.off += n
}

func (c *cursor) i16() int16 {
	if len(c.p)-c.off < 2 {
		c.fail("int16")
		return 0
	}
	v := int16(binary.BigEndian.Uint16(c.p[c.off:]))
	c.off += 2
	return v
}

func (c *cursor) i32() int32 {
	if len(c.p)-c.off < 4 {
		c.fail("int32")
		return 0
	}
	v := int32(binary.BigEndian.Uint32(c.p[c.off:]))
	c.off += 4
	return v
}

func (c *cursor) uvarint() uint32 {
	if c.err != nil {
		return 0
	}
	v, off, err := uvarint(c.p, c.off)
	if err != nil {
		c.err = err
		c.off = len(c.p)
		return 0
	}
	c.off = off
	return v
}

// arrayLen reads an array length; null arrays read as 0.
func (c *cursor) arrayLen() int {
	if c.flex {
		n := int(c.uvarint()) - 1
		if n < 0 {
			return 0
		}
		return n
	}
	n := int(c.i32())
	if n < 0 {
		return 0
	}
	return n
}

// bytes skips a (nullable) string or bytes field.
func (c *cursor) bytes() {
	if c.flex {
		n := int(c.uvarint()) - 1
		if n > 0 {
			c.skip(n, "compact bytes")
		}
		return
	}
	c.skip(int(c.i16()), "string")
}

// bytes32 skips a classic (nullable) bytes field with an int32 length.
func (c *cursor) bytes32() {
	if c.flex {
		c.bytes()
		return
	}
	if n := int(c.i32()); n > 0 {
		c.skip(n, "bytes")
	}
}

func (c *cursor) str() {
	if c.flex {
		c.bytes()
		return
	}
	if n := int(c.i16()); n > 0 {
		c.skip(n, "string")
	}
}

func (c *cursor) tags() {
	if !c.flex || c.err != nil {
		return
	}
	end, err := skipTags(c.p, c.off)
	if err != nil {
		c.err = err
		c.off = len(c.p)
		return
	}
	c.off = end
}

// produceLayout walks a Produce response body (v1+) and returns the offset
// of throttle_time_ms, which follows the topic array, and of the top-level
// tag section (-1 below v9).
func produceLayout(p []byte, bodyOff int, version int16) (throttle, tags int, err error) {
	c := cursor{p: p, off: bodyOff, flex: version >= 9}
	for t := c.arrayLen(); t > 0 && c.err == nil; t-- {
		if version >= 13 {
			c.skip(16, "topic id")
		} else {
			c.str()
		}
		for n := c.arrayLen(); n > 0 && c.err == nil; n-- {
			c.skip(4+2+8, "partition") // partition, error, base offset
			if version >= 2 {
				c.skip(8, "log append time")
			}
			if version >= 5 {
				c.skip(8, "log start offset")
			}
			if version >= 8 {
				for e := c.arrayLen(); e > 0 && c.err == nil; e-- {
					c.skip(4, "batch index")
					c.str()
					c.tags()
				}
				c.str() // error message
			}
			c.tags()
		}
		c.tags()
	}
	throttle = c.off
	c.skip(4, "throttle")
	tags = -1
	if c.flex {
		tags = c.off
		c.tags()
	}
	return throttle, tags, c.err
}

// fetchTagsOffset walks a flexible Fetch response body (v12+) past all
// record data, which is length-prefixed and skipped without a copy, and
// returns the offset of the top-level tag section.
func fetchTagsOffset(p []byte, bodyOff int, version int16) (int, error) {
	c := cursor{p: p, off: bodyOff, flex: true}
	c.skip(4+2+4, "fetch header") // throttle, error, session id
	for t := c.arrayLen(); t > 0 && c.err == nil; t-- {
		if version >= 13 {
			c.skip(16, "topic id")
		} else {
			c.str()
		}
		for n := c.arrayLen(); n > 0 && c.err == nil; n-- {
			c.skip(4+2+8+8+8, "partition") // partition, error, hwm, lso, log start
			for a := c.arrayLen(); a > 0 && c.err == nil; a-- {
				c.skip(16, "aborted txn")
				c.tags()
			}
			c.skip(4, "preferred read replica")
			c.bytes32() // records
			c.tags()
		}
		c.tags()
	}
	return c.off, c.err
}

// hasTags reports whether the tag section at off has any tag.
func hasTags(p []byte, off int) bool {
	return off >= 0 && off < len(p) && p[off] != 0
}
