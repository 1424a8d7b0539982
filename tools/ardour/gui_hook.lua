ardour {
	["type"]    = "EditorHook",
	name        = "Stembridge importer (acceptance test)",
	description = "Once: run $SB_ACTION_SCRIPT with stems_txt=$SB_STEMS_TXT source=$SB_SOURCE mute=1, save, quit",
}

function signals ()
	return LuaSignal.Set():add ({[LuaSignal.LuaTimerS] = true})
end

-- After ../../shared/ardour/gui-import/stem_action_hook.lua: LuaTimerS fires about ten times a
-- second, do_import re-enters the hook (phase guard), quitting goes through OSC.
function factory (args)
	local LOG  = os.getenv ("SB_LOG") or "/tmp/stembridge-gui-hook.log"
	local PORT = os.getenv ("SB_OSC_PORT") or "3819"
	local phase, ticks = 0, 0
	local function log (m)
		local f = io.open (LOG, "a")
		if f then f:write (os.date ("%H:%M:%S ") .. m .. "\n") f:close () end
	end
	local function quit ()
		ARDOUR.LuaOSC.Address ("osc.udp://127.0.0.1:" .. PORT):send ("/access_action", "s", "Common/Quit")
		log ("quit requested")
	end
	return function (signal, ref, ...)
		ticks = ticks + 1
		if phase == 0 and ticks >= 5 then
			phase = 1
			local ok, err = pcall (function ()
				local script = os.getenv ("SB_ACTION_SCRIPT")
				local env = setmetatable ({ ardour = function () end }, { __index = _ENV })
				local chunk = assert (loadfile (script, "t", env))
				chunk ()
				env.factory ({ stems_txt = os.getenv ("SB_STEMS_TXT"), source = os.getenv ("SB_SOURCE"), mute = "1" }) ()
			end)
			log (ok and "import done" or ("IMPORT ERROR: " .. tostring (err)))
			phase = 2; ticks = 0
		elseif phase == 2 and ticks >= 5 then
			phase = 3; ticks = 0
			Session:save_state ("", false, false, false)
			log ("saved")
		elseif phase == 3 and ticks >= 5 then
			phase = 4; ticks = 0
			quit ()
		elseif phase == 4 and ticks >= 100 then
			ticks = 0
			quit ()
		end
	end
end
